// mpi_job_secret(): under mpirun a job without RINGD_JOB_SECRET still gets one. MPI already joins
// the ranks (its own launch, its own channel), so rank 0 draws 32 random bytes and broadcasts them;
// the tcp transport's handshakes, the rendezvous store and co-located parameter servers then
// authenticate with it, and a stranger who finds a port cannot join (docs/security.md).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <array>

#include "net/socket.h"
#include "ringd/mpi.h"
#include "transport/mpi/mpi_errors.h"

namespace ringd {

std::string mpi_job_secret(MPI_Comm comm, const std::string& configured) {
  mpi_ensure_initialized();
  int rank = 0;
  mpi::check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  // Rank 0's choice is everyone's: '!' = it has a configured secret (every rank uses its own, as
  // before: they must agree), else 64 hex digits of a fresh one.
  std::array<char, 65> message{};
  if (rank == 0) {
    if (!configured.empty()) {
      message[0] = '!';
    } else {
      const std::string secret = net::random_hex(32);
      std::copy(secret.begin(), secret.end(), message.begin());
    }
  }
  mpi::check_mpi(MPI_Bcast(message.data(), static_cast<int>(message.size()), MPI_CHAR, 0, comm),
                 "MPI_Bcast of the job secret");
  if (message[0] == '!') return configured;
  return std::string(message.data(), 64);
}

}  // namespace ringd
