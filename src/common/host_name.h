// This machine's host name, asked once (gethostname): for log lines, diagnostics and file names.
#pragma once

#include <string>

namespace ringd {

// "unknown-host" when the system has none to give.
const std::string& host_name();

}  // namespace ringd
