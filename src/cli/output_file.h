// Flags that name a file rank 0 writes once the work is done (--json, --params-out): checked when
// the flags are parsed, so a path that cannot be written is a usage error (exit 2) at once instead
// of a failure after the whole run. The check creates nothing.
#pragma once

#include <string>

namespace CLI {
class Validator;
}

namespace ringd::cli {

// "" when `path` can be written (an existing file that is writable, or a new file in an existing,
// writable directory); else why not, e.g. "directory /nonexistent does not exist".
std::string output_file_problem(const std::string& path);

// A CLI11 check built on output_file_problem.
CLI::Validator writable_output_file();

}  // namespace ringd::cli
