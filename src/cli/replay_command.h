// `ringd bench replay`: gradient replay through the fusion engine (issue 5). cli.cc hands the
// command line over here when it starts with "bench replay"; this file parses its own flags
// (CLI11) and runs it on inproc threads, tcp or mpi, like `ringd bench`.
#pragma once

#include "runners/replay_config.h"

namespace ringd::cli {

// argv[1] == "bench" && argv[2] == "replay".
bool is_replay_command(int argc, const char* const* argv);

// Parses argv (starting "ringd bench replay ..."). Returns true when the replay should run;
// otherwise help or an error was printed and *exit_code says how to exit (0 or 2).
bool parse_replay_command_line(int argc, const char* const* argv, runners::ReplayConfig* config,
                               int* exit_code);

// Parse, run, print (rank 0); exit code 0, 1 (failure or --check found wrong values) or 2.
int run_replay_command_line(int argc, const char* const* argv);

}  // namespace ringd::cli
