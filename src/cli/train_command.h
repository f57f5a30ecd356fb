// `ringd train`: data-parallel training of an MLP on MNIST-style data (or of the replay model),
// in allreduce mode (the fusion engine) or ps mode (src/ps/). cli.cc hands the command line over
// here when it starts with "train"; like `ringd bench`, it runs under mpirun, standalone with
// --rank/--size/--rendezvous, or as --transport inproc --ranks N threads of one process.
#pragma once

#include "runners/train_config.h"

namespace ringd::cli {

// argv[1] == "train".
bool is_train_command(int argc, const char* const* argv);

// Parses argv (starting "ringd train ..."). Returns true when training should run; otherwise help
// or an error was printed and *exit_code says how to exit (0 or 2).
bool parse_train_command_line(int argc, const char* const* argv, runners::TrainConfig* config,
                              int* exit_code);

// Parse, run, print (rank 0); exit code 0, 1 (failure) or 2 (bad command line).
int run_train_command_line(int argc, const char* const* argv);

}  // namespace ringd::cli
