// ringd::ErrorCode as Python names it (python/src/errors.cc).
#pragma once

#include "ringd/error.h"

namespace ringd::python {

// The `code` attribute of the code's exception class: "peer_lost", "mismatch", ...
const char* error_code_python_name(ErrorCode code);

}  // namespace ringd::python
