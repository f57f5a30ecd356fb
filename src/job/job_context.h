// The Context of a multi-process job (tcp, mpi or ibverbs), from its Topology: how the ranks find
// each other (mpirun's MPI, --rendezvous on rank 0, or alone) and the connection itself. What
// `ringd bench replay` uses; the same steps as `ringd bench`'s own (bench_command.cc).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "job/topology.h"
#include "ringd/store.h"
#include "ringd/tcp.h"
#include "ringd/transport.h"

namespace ringd::job {

struct JobConnectOptions {
  std::chrono::milliseconds timeout{0};  // 0 = RINGD_TIMEOUT
  std::string interface;                 // tcp: listen on / advertise this interface
  int tcp_port = 0;                      // tcp: this rank's listening port (0 = any)
  // The context will be used from a thread other than main (the fusion engine's): MPI is then
  // initialised with MPI_THREAD_SERIALIZED (kUnavailable if the library cannot give that).
  bool mpi_from_other_thread = false;
};

struct JobContext {
  std::unique_ptr<TcpStoreServer> server;  // rank 0 of a standalone tcp job
  std::unique_ptr<Store> store;
  std::unique_ptr<Context> ctx;
  std::string secret;  // what the job authenticates with (job_secret()); "" = none
};

// The job secret: RINGD_JOB_SECRET / _FILE when set; else, for tcp or ibverbs under mpirun without
// --rendezvous, a fresh one from rank 0 through MPI (mpi_job_secret; collective: every rank of such
// a job must call this once, at the same point); else "" (an unauthenticated job, warned about).
// `timeout` bounds MPI_Init there (0 = RINGD_TIMEOUT).
std::string job_secret(const Topology& topology,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

// Not for inproc (threads of this process: see InprocHub). Throws ringd::Error naming the rank
// and what is missing.
JobContext connect_job(const Topology& topology, const JobConnectOptions& options);

// --transport inproc: body(ctx, rank) on one thread per rank of one InprocHub. The first error
// wins: its rank is killed in the hub so the others stop waiting for it, and it is rethrown once
// every thread has ended.
void run_inproc_ranks(int ranks, std::chrono::milliseconds timeout,
                      const std::function<void(Context& ctx, int rank)>& body);

}  // namespace ringd::job
