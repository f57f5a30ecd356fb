// The `ringd` command line (CLI11): flags -> a command to run. Exit codes: 0 success, 1 a failure
// while running (one line "ringd: error: <message>"), 2 a command line that cannot work (CLI11's
// message, or "ringd: error: ..." for a combination that is wrong for this job).
#pragma once

#include "launcher/bench_config.h"

namespace ringd::launcher {

struct CommandLine {
  enum class Command { kNone, kBench };
  Command command = Command::kNone;
  BenchConfig bench;
};

// Parses argv. Returns true when `command` should run; otherwise the parse printed help, the
// version or an error, and *exit_code says how to exit.
bool parse_command_line(int argc, const char* const* argv, CommandLine* command, int* exit_code);

// main(): parse, run, map errors to exit codes.
int run_command_line(int argc, const char* const* argv);

}  // namespace ringd::launcher
