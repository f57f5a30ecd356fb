// The mpi transport: Open MPI point-to-point (MPI_Isend/MPI_Irecv) on a duplicated communicator,
// so ringd's messages never match the application's. Waits poll MPI_Test with a sleeping back-off
// (no spinning) and honour the context timeout. Only in builds with RINGD_HAVE_MPI.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "ringd/config.h"
#include "ringd/store.h"
#include "ringd/transport.h"

#if RINGD_HAVE_MPI
#include <mpi.h>

namespace ringd {

// Initialises MPI (MPI_THREAD_FUNNELED) if nobody has; finalizes at exit if it initialised it.
// MPI_Init waits for every process of the mpirun job: after `timeout` (0 = RINGD_TIMEOUT), or on
// Ctrl-C, this process ends with a message saying which rank is missing, as far as this host can
// tell (src/transport/mpi/mpi_init.h); no error can be raised from inside MPI_Init.
void mpi_ensure_initialized(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

// Collective over `comm`: every rank must call it. The context owns a duplicate of `comm`.
std::unique_ptr<Context> mpi_connect(MPI_Comm comm, std::chrono::milliseconds timeout = {});

// The job secret under mpirun, collective over `comm`: rank 0's `configured` secret
// (RINGD_JOB_SECRET or _FILE) when it has one (every rank then uses its own configured one), else a
// fresh random one that rank 0 broadcasts, so a job is authenticated even when nobody set a secret.
std::string mpi_job_secret(MPI_Comm comm, const std::string& configured);

// For the tcp transport under mpirun: rank 0 of `comm` serves a TcpStoreServer and broadcasts its
// address (that of `interface`; empty: RINGD_IFACE's, else the host name's); every rank gets a
// client. Collective over `comm`.
std::unique_ptr<Store> mpi_bootstrap_store(MPI_Comm comm, const std::string& secret = {},
                                           const std::string& interface = {});

}  // namespace ringd
#endif
