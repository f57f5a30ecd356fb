#include "job/job_context.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "common/tunables.h"
#include "net/handshake.h"
#include "ringd/config.h"
#include "ringd/error.h"
#include "ringd/ibverbs.h"
#include "ringd/inproc.h"
#if RINGD_HAVE_MPI
#include <mpi.h>

#include "ringd/mpi.h"
#include "transport/mpi/mpi_init.h"
#endif

namespace ringd::job {
namespace {

#if RINGD_HAVE_MPI
void finalize_mpi_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// MPI calls from the engine's background thread while the main thread makes none: SERIALIZED.
void init_mpi_serialized(int rank, std::chrono::milliseconds timeout) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    provided = mpi::init_thread_bounded(MPI_THREAD_SERIALIZED, timeout);
    std::atexit(finalize_mpi_at_exit);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    RINGD_THROW(kUnavailable, "rank " << rank
                                      << ": this MPI library does not allow calls from a second "
                                         "thread (MPI_THREAD_SERIALIZED), which the fusion "
                                         "engine needs; use --transport tcp");
  }
}
#endif

}  // namespace

std::string job_secret(const Topology& topology, std::chrono::milliseconds timeout) {
  const std::string& configured = tunables().job_secret;
#if RINGD_HAVE_MPI
  if (topology.under_mpirun && topology.transport != "mpi" && topology.transport != "inproc" &&
      topology.rendezvous_host.empty() && topology.size > 1) {
    mpi_ensure_initialized(timeout);
    return mpi_job_secret(MPI_COMM_WORLD,
                          configured);  // the MPI bootstrap's job: see job_context.h
  }
#endif
  (void)topology;
  (void)timeout;
  return configured;
}

namespace {

// A job nothing identifies (no launcher's id, no secret): a process of another job started with
// the same rendezvous address and size could take a rank in it. Said once, by rank 0.
void warn_without_identity(const Topology& topology, const JobIdentity& identity) {
  if (!identity.id.empty() || topology.rank != 0 || topology.size < 2) return;
  RINGD_LOG(kWarn) << "rank 0: this job has no identity (no RINGD_JOB_ID, torchrun run id, "
                      "mpirun job or StatefulSet) and no job secret: a process of another job "
                      "started with the same rendezvous address ("
                   << topology.rendezvous_host << ":" << topology.rendezvous_port
                   << ") and --size could join it as a rank. Set RINGD_JOB_ID to the same value "
                      "on every rank (or RINGD_JOB_SECRET / RINGD_JOB_SECRET_FILE)";
}

}  // namespace

JobContext connect_job(const Topology& topology, const JobConnectOptions& options) {
  set_log_rank(topology.rank);
  const std::chrono::milliseconds timeout =
      options.timeout.count() > 0 ? options.timeout : tunables().timeout;
  JobContext job;
#if RINGD_HAVE_MPI
  if (options.mpi_from_other_thread && (topology.under_mpirun || topology.transport == "mpi")) {
    init_mpi_serialized(topology.rank, timeout);
  }
#endif
  job.secret = job_secret(topology, timeout);
  const std::string& secret = job.secret;
  if (topology.transport == "mpi") {
#if RINGD_HAVE_MPI
    mpi_ensure_initialized(timeout);
    job.ctx = mpi_connect(MPI_COMM_WORLD, timeout);
#endif
  } else {
    if (!topology.rendezvous_host.empty()) {
      if (topology.rank == 0) {
        job.server = std::make_unique<TcpStoreServer>(topology.rendezvous_host,
                                                      topology.rendezvous_port, secret);
      }
      job.store = std::make_unique<TcpStore>(topology.rendezvous_host, topology.rendezvous_port,
                                             secret, timeout);
    } else if (topology.size == 1) {
      job.store = std::make_unique<MemoryStore>();
    } else {
#if RINGD_HAVE_MPI
      mpi_ensure_initialized(timeout);
      job.store = mpi_bootstrap_store(MPI_COMM_WORLD, secret, options.interface);
#endif
    }
    RINGD_CHECK_ARG(job.store != nullptr, "rank " << topology.rank << ": no way to find the peers");
    try {
      if (topology.transport == "ibverbs") {
        IbverbsOptions ib;
        ib.timeout = timeout;
        job.ctx = ibverbs_connect(*job.store, topology.rank, topology.size, ib);
      } else {
        TcpOptions tcp;
        tcp.interface = options.interface;
        tcp.port = static_cast<uint16_t>(options.tcp_port);
        tcp.secret = secret;
        tcp.timeout = timeout;
        if (!topology.rendezvous_host.empty()) {
          // MPI's bootstrap store carries an id rank 0 broadcast; a rendezvous address anyone
          // can reach needs the launcher's word on which job this is.
          const JobIdentity identity =
              resolve_job_identity(topology, process_environment(), net::resolve_secret(secret));
          tcp.job_id = identity.id;
          tcp.job_source = identity.source;
          warn_without_identity(topology, identity);
        }
        job.ctx = tcp_connect(*job.store, topology.rank, topology.size, tcp);
      }
    } catch (const Error& error) {
      // A peer that never arrived may be one that this rank's store refused for another secret
      // (whatever the transport): say so here too, not only a timeout.
      const std::string refused = job.server ? job.server->refused_for_secret() : "";
      if (error.code() != ErrorCode::kTimeout || refused.empty()) throw;
      throw Error(error.code(), std::string(error.what()) + "; meanwhile " + refused +
                                    ": the missing rank may run with another RINGD_JOB_SECRET / "
                                    "RINGD_JOB_SECRET_FILE (its own error says)");
    }
  }
  RINGD_CHECK_ARG(job.ctx != nullptr, "transport " << topology.transport << " is not built in");
  job.ctx->set_timeout(timeout);
  return job;
}

namespace {

// How likely an error is the root cause rather than a symptom of another rank's failure: a
// peer lost or a timeout is what the other ranks see when one fails on its own (lower = first).
int symptom_rank(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kPeerLost) return 2;
    if (e.code() == ErrorCode::kTimeout) return 1;
    return 0;
  } catch (...) {
    return 0;
  }
}

}  // namespace

void run_inproc_ranks(int ranks, std::chrono::milliseconds timeout,
                      const std::function<void(Context& ctx, int rank)>& body) {
  InprocHub hub(ranks);
  std::mutex mutex;
  std::vector<std::exception_ptr> errors;  // in the order they happened
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(ranks));
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto ctx = hub.connect(rank, timeout);
        body(*ctx, rank);
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          errors.push_back(std::current_exception());
        }
        hub.kill_rank(rank);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (errors.empty()) return;
  // The rank's own failure (no space left, a refused checkpoint), not the "peer lost" the others
  // saw after it, even when one of them happened to throw first.
  const auto root = std::min_element(
      errors.begin(), errors.end(),
      [](const auto& a, const auto& b) { return symptom_rank(a) < symptom_rank(b); });
  std::rethrow_exception(*root);
}

}  // namespace ringd::job
