// The version ringd was built as (the CMake project version).
#pragma once

namespace ringd {
const char* version_string();
}  // namespace ringd
