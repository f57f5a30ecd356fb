// A child run to its end under SIGTERM and SIGINT, as `ringd launch` runs mpirun: the signals
// arrive through a signalfd (BlockedSignals) while the child runs or a pause lasts, and are
// unblocked again afterwards, so that outside them a signal ends the process at once.
#pragma once

#include <chrono>
#include <string>

#include "launcher/child_process.h"

namespace ringd::launcher {

// Runs `spawn` to its end. The first SIGTERM/SIGINT is forwarded to the child's process group and
// kept in *signal_received; a second one kills the child. `self` and `child` name both in the log
// lines ("ringd launch", "mpirun"). Returns the child's exit code; throws ringd::Error when it
// cannot start.
int run_forwarding_signals(const SpawnOptions& spawn, const std::string& self,
                           const std::string& child, int* signal_received);

// Sleeps `delay` unless SIGTERM or SIGINT comes first; returns that signal, or 0.
int pause_unless_signalled(std::chrono::milliseconds delay);

}  // namespace ringd::launcher
