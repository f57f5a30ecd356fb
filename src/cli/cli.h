// The `ringd` command line (CLI11): flags -> a command to run. Exit codes: 0 success, 1 a failure
// while running (one line "ringd: error: <message>"), 2 a command line that cannot work (CLI11's
// message, or "ringd: error: ..." for a combination that is wrong for this job).
#pragma once

#include <cstddef>
#include <string>

#include "runners/bench_config.h"

namespace ringd::cli {

struct CommandLine {
  enum class Command { kNone, kBench };
  Command command = Command::kNone;
  runners::BenchConfig bench;
};

// Parses argv. Returns true when `command` should run; otherwise the parse printed help, the
// version or an error, and *exit_code says how to exit.
bool parse_command_line(int argc, const char* const* argv, CommandLine* command, int* exit_code);

// `ringd --help-env`: every RINGD_* variable, its default and meaning, in aligned columns whatever
// the names' lengths, the meaning wrapped at `width` columns.
std::string format_environment_help(size_t width);

// "unknown command 'tran'; did you mean 'train'? (commands: ...)" for a first word that is no
// command (main() prints it and exits 2).
std::string unknown_command_message(const std::string& word);

// main(): parse, run, map errors to exit codes.
int run_command_line(int argc, const char* const* argv);

}  // namespace ringd::cli
