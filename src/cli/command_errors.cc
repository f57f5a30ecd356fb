#include "cli/command_errors.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "common/tunables.h"
#include "ringd/config.h"
#include "ringd/error.h"
#if RINGD_HAVE_MPI
#include <mpi.h>
#endif

namespace ringd::cli {

void print_error(const std::exception& error) {
  std::fflush(stdout);
  const auto* ringd_error = dynamic_cast<const Error*>(&error);
  if (ringd_error && ringd_error->code() != ErrorCode::kInvalidArgument) {
    std::fprintf(stderr, "ringd: error: %s: %s\n", error_code_name(ringd_error->code()),
                 error.what());
  } else {
    std::fprintf(stderr, "ringd: error: %s\n", error.what());
  }
  std::fflush(stderr);
}

void abort_mpi_job_if_running(int exit_code) {
#if RINGD_HAVE_MPI
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    // The failed collective's abort notice reaches the other ranks at once, and each reports its
    // own error; MPI_Abort kills them all. A short grace first, so that no rank is killed before
    // it has said why it failed (a job whose ranks all disagree must not show one rank's word).
    std::this_thread::sleep_for(kMpiAbortGrace);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
#else
  (void)exit_code;
#endif
}

int parse_command_line(CLI::App& app, const char* name, int argc, const char* const* argv,
                       int first, const std::function<void()>& finish) {
  std::vector<const char*> args = {name};
  for (int i = first; i < argc; ++i) args.push_back(argv[i]);
  try {
    app.parse(static_cast<int>(args.size()), args.data());
    if (finish) finish();
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;
  } catch (const Error& error) {
    print_error(error);
    return 2;
  }
  return -1;
}

int run_elastic_command(const std::function<int()>& run) {
  try {
    tunables();  // a malformed RINGD_* variable is a usage error (exit 2) like a malformed flag
  } catch (const std::exception& error) {
    print_error(error);
    return 2;
  }
  try {
    return run();
  } catch (const std::exception& error) {
    print_error(error);
    return 1;
  }
}

int run_job_command(const job::TopologyFlags& flags, const std::function<void()>& check,
                    const std::function<int(const job::Topology&)>& run) {
  job::Topology topology;
  try {
    tunables();  // a malformed RINGD_* variable is a usage error (exit 2) like a malformed flag
    topology = job::resolve_topology(flags, job::process_environment(), RINGD_HAVE_MPI);
    if (check) check();
  } catch (const std::exception& error) {
    print_error(error);
    return 2;
  }
  try {
    return run(topology);
  } catch (const std::exception& error) {
    print_error(error);
    abort_mpi_job_if_running(1);
    return 1;
  }
}

}  // namespace ringd::cli
