// mpi_ensure_initialized() and mpi_connect(): the mpi transport's entry points.
// C API only: keep <mpi.h> from pulling in the deprecated C++ bindings (libmpi_cxx).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "common/logging.h"
#include "common/tunables.h"
#include "ringd/mpi.h"
#include "transport/mpi/mpi_errors.h"
#include "transport/mpi/mpi_init.h"
#include "transport/mpi/mpi_pair.h"

namespace ringd {
namespace {

void finalize_at_exit() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

}  // namespace

void mpi_ensure_initialized(std::chrono::milliseconds timeout) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    RINGD_THROW(kUnavailable,
                "MPI has already been finalized in this process; the mpi transport "
                "cannot start again");
  }
  const int provided = mpi::init_thread_bounded(MPI_THREAD_FUNNELED,
                                                timeout.count() > 0 ? timeout : tunables().timeout);
  std::atexit(finalize_at_exit);
  if (provided < MPI_THREAD_FUNNELED) {
    RINGD_LOG(kWarn) << "MPI provides thread level " << provided
                     << " (< MPI_THREAD_FUNNELED); ringd calls MPI from one thread only";
  }
}

std::unique_ptr<Context> mpi_connect(MPI_Comm comm, std::chrono::milliseconds timeout) {
  mpi_ensure_initialized();
  if (timeout.count() <= 0) timeout = tunables().timeout;

  MPI_Comm dup = MPI_COMM_NULL;
  // The caller's communicator may still have MPI_ERRORS_ARE_FATAL; that is its business.
  mpi::check_mpi(MPI_Comm_dup(comm, &dup), "MPI_Comm_dup of the job's communicator");
  auto communicator = std::make_shared<mpi::Communicator>(dup);
  mpi::check_mpi(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");

  int rank = 0;
  int size = 0;
  mpi::check_mpi(MPI_Comm_rank(dup, &rank), "MPI_Comm_rank");
  mpi::check_mpi(MPI_Comm_size(dup, &size), "MPI_Comm_size");

  // Host names, so error messages can say where a peer runs.
  std::vector<char> names(static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME, '\0');
  char my_name[MPI_MAX_PROCESSOR_NAME] = {0};
  int name_length = 0;
  mpi::check_mpi(MPI_Get_processor_name(my_name, &name_length), "MPI_Get_processor_name");
  mpi::check_mpi(MPI_Allgather(my_name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(),
                               MPI_MAX_PROCESSOR_NAME, MPI_CHAR, dup),
                 "rank " + std::to_string(rank) + ": MPI_Allgather of host names");

  std::vector<std::unique_ptr<Pair>> pairs(static_cast<size_t>(size));
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    auto state = std::make_shared<mpi::PairState>();
    state->comm = communicator;
    state->rank = rank;
    state->peer = peer;
    const char* host = names.data() + static_cast<size_t>(peer) * MPI_MAX_PROCESSOR_NAME;
    state->peer_host = std::string(host, strnlen(host, MPI_MAX_PROCESSOR_NAME));
    state->default_timeout = timeout;
    pairs[peer] = std::make_unique<mpi::MpiPair>(std::move(state));
  }
  RINGD_LOG(kInfo) << "mpi transport: rank " << rank << " of " << size << " connected";
  return std::make_unique<Context>(rank, size, "mpi", std::move(pairs), communicator, timeout);
}

}  // namespace ringd
