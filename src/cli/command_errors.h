// How every ringd command ends on an error, the same way for bench, replay, train and ps.
#pragma once

#include <chrono>
#include <exception>
#include <functional>

#include "job/topology.h"

namespace CLI {
class App;
}

namespace ringd::cli {

// "ringd: error: <kind>: <message>" on stderr (stdout flushed first, so the lines stay in order):
// the kind (timeout, peer lost, authentication failed, ...) is ringd::Error's code, left out for
// invalid arguments; the message already says where and what to do.
void print_error(const std::exception& error);

// After an error under MPI, end the whole job: other ranks may be blocked in MPI, and
// MPI_Finalize would wait for them. Waits kMpiAbortGrace first, so that the ranks that fail with
// this one (a mismatch, a lost peer) print their own error before MPI_Abort kills them. Does
// nothing when MPI is not running (or not built in).
constexpr std::chrono::milliseconds kMpiAbortGrace{1000};
void abort_mpi_job_if_running(int exit_code);

// The head of a command: parses argv[first..] with `app` (CLI11 wants a program name first; `name`
// stands for argv[0..first-1]), then runs `finish` (conversions and checks across flags) under the
// same error handling: a usage error, CLI11's or a ringd::Error from `finish`, is printed and gives
// exit code 2 (0 for --help). Returns -1 when the command line parsed and the command goes on.
int parse_command_line(CLI::App& app, const char* name, int argc, const char* const* argv,
                       int first, const std::function<void()>& finish);

// The tail of `ringd train --elastic` (no topology to resolve: the rendezvous hands out ranks):
// a malformed RINGD_* variable is exit code 2, `run`'s errors are printed and exit code 1.
int run_elastic_command(const std::function<int()>& run);

// The tail of every multi-rank command after its flags parsed: resolves where this process sits
// and runs `check` (errors: printed, exit code 2, as for bad flags), then `run` (errors: printed,
// an MPI job aborted, exit code 1).
int run_job_command(const job::TopologyFlags& flags, const std::function<void()>& check,
                    const std::function<int(const job::Topology&)>& run);

}  // namespace ringd::cli
