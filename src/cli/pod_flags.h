// Flags shared by `ringd agent`, `hostfile` and `launch`: the pod's identity, and the split of a
// command line at its first "--".
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "job/topology.h"

namespace ringd::cli {

// --pod-name --replicas --service --namespace --cluster-domain (see topology.h).
void add_identity_options(CLI::App* app, job::TopologyFlags* flags);

// argv[0..) up to the first "--" (kept as CLI11's input) and the words after it; true when there
// was a "--".
bool split_at_double_dash(int argc, const char* const* argv, std::vector<std::string>* before,
                          std::vector<std::string>* after);

// Runs CLI11 on `words` (argv[0] first). Returns -1 when the command should run, else the exit
// code (0 after --help, 2 after an error, both already printed).
int parse_words(CLI::App* app, const std::vector<std::string>& words);

// "ringd: error: <message>" on stderr.
void print_pod_error(const char* command, const std::exception& error);

}  // namespace ringd::cli
