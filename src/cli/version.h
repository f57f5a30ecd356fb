// The version ringd was built as (the CMake project version), and what this build can do.
#pragma once

#include <string>

namespace ringd {
const char* version_string();

// `ringd --version`: the version, then one line per kind of backend with what this build has
// ([X]) and lacks ([ ]), like `horovodrun --check-build`:
//   ringd 0.1.0
//   Transports:    [X] tcp  [X] mpi  [X] ibverbs  [X] inproc
//   Local groups:  [X] CPU devices  [ ] NCCL (GPUs)
//   ...
std::string build_report();

// The labels of the ringd_build_info gauge: version="0.1.0",mpi="true",... (the optional backends).
std::string build_info_labels();
}  // namespace ringd
