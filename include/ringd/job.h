// Setting up a job in one call: where this process sits (identity), how the ranks find each other
// (rendezvous), the connection (transport → Context) and, optionally, the fusion engine on it. The
// Python package and C++ programs open their jobs here; the `ringd` commands call the same
// job::connect_job() underneath (src/job/job_context.h).
//
//   ringd::JobOptions options;             // all unset: found from the environment
//   ringd::Job job(options);               // collective: every rank of the job opens it
//   ringd::Engine& engine = job.engine();  // allreduce_async(...) etc., see ringd/engine.h
//
// Where the ranks are, in this order (the first that speaks wins; two that disagree are an error
// naming both):
//  * explicit rank/size (+ rendezvous host:port for tcp and ibverbs);
//  * mpirun: OMPI_COMM_WORLD_RANK/SIZE (+ _LOCAL_RANK/_LOCAL_SIZE); the peers are found through
//    MPI, the transport defaults to mpi;
//  * torchrun: RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE; rank 0 serves the rendezvous store at
//    MASTER_ADDR, port RINGD_RENDEZVOUS_PORT, else MASTER_PORT + 1 (torchrun's store holds
//    MASTER_PORT);
//  * a Kubernetes StatefulSet pod: POD_NAME "<set>-<ordinal>" and RINGD_REPLICAS
//  (docs/launcher.md);
//  * nothing: a world of one.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "ringd/engine.h"
#include "ringd/transport.h"

namespace ringd {

struct JobOptions {
  int rank = -1;           // -1: from the environment
  int size = -1;           // -1: from the environment
  std::string rendezvous;  // "host:port" where rank 0 serves the store; "": from the environment
  std::string transport;   // tcp | mpi | ibverbs; "": mpi under mpirun (when built in), else tcp
  std::string interface;   // tcp: listen on / advertise this interface ("": any)
  int tcp_port = 0;        // tcp: this rank's listening port (0: any)
  std::chrono::milliseconds timeout{0};  // 0: RINGD_TIMEOUT
  bool start_engine = true;              // false: the Context is the caller's (context())
  EngineOptions engine;
};

// Where this process sits. local_*: the processes of this host (mpirun's and torchrun's local
// rank and size; 1 per pod otherwise: ringd runs one process per node). cross_*: this process
// among those with the same local rank, as in Horovod (cross_size = the number of nodes when every
// node runs as many processes).
struct JobIdentity {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
  std::string transport;  // the transport in use
  std::string source;     // what told it: "explicit", "mpirun", "torchrun", "statefulset", "single"
};

class ElasticJob;

class Job {
 public:
  // Collective: returns once every rank is connected (and their engines started). Throws
  // ringd::Error naming the rank and what is wrong: kInvalidArgument for contradicting or
  // malformed inputs, kTimeout when the peers do not all arrive within the timeout.
  explicit Job(const JobOptions& options = {});
  ~Job();  // shutdown(), never throws

  // Like the constructor, but the wait for the peers can be interrupted (Ctrl-C in a binding):
  // `interrupted` is called on this thread every `every`, and when it returns true open() returns
  // nullptr at once, leaving the opening to end on its own (at its timeout, or shut down as soon
  // as it completes). The waiting runs on a helper thread, except for the mpi transport: MPI is
  // initialized and finalized on one thread, and mpirun ends its processes on Ctrl-C itself.
  static std::unique_ptr<Job> open(
      const JobOptions& options, const std::function<bool()>& interrupted,
      std::chrono::milliseconds every = std::chrono::milliseconds(100));
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  const JobIdentity& identity() const;
  int rank() const { return identity().rank; }
  int size() const { return identity().size; }

  // The engine (start_engine) — while it runs, the Context is its own thread's; throws
  // kInvalidArgument when the job was opened without one, or after shutdown().
  Engine& engine();
  // The connection itself; with an engine running, only for reading rank/size/transport.
  Context& context();

  // Stops the engine (collective in effect: see Engine::shutdown, which `reason` is passed to)
  // and closes the connection. Idempotent.
  void shutdown(const std::string& reason = "", bool failed = false);

  struct Impl;

 private:
  friend class ElasticJob;
  struct Formed {};
  explicit Job(Formed);  // ElasticJob::form() fills it in
  std::unique_ptr<Impl> impl_;
};

// An elastic job (docs/elastic.md; `ringd train --elastic` is built on the same pieces): the
// processes form generation after generation of ranks through a rendezvous store. form() joins the
// next generation and returns it as a Job (tcp, engine started) of its ranks; when a collective
// fails because a rank was lost (PeerLost, or Timeout for a cut link), shut that Job down, end()
// the generation and form() the next one among whoever is left. A process started later with the
// same options waits in the next generation; the running ranks see it (newcomer_waiting(), which
// they must agree on, e.g. through an allreduce at a step boundary), end theirs and form the next
// one with it. Rank 0 of every generation is a process that gave form() the newest `step`: the one
// to take state from.
struct ElasticJobOptions {
  std::string rendezvous;  // "host:port", the same everywhere; the process on host serves it
  int min_ranks = 1;       // fewer wait (up to the timeout) for more
  int max_ranks = 1;       // a generation with this many closes at once
  std::string interface;   // tcp: listen on / advertise this interface ("": any)
  int tcp_port = 0;        // tcp: this process's listening port (0: any)
  std::chrono::milliseconds timeout{0};  // 0: RINGD_TIMEOUT
  EngineOptions engine;
};

class ElasticJob {
 public:
  // Serves or joins the store; the job identity comes from the environment (RINGD_JOB_ID or the
  // job secret: required). Throws kInvalidArgument for missing or unusable options.
  explicit ElasticJob(const ElasticJobOptions& options);
  ~ElasticJob();
  ElasticJob(const ElasticJob&) = delete;
  ElasticJob& operator=(const ElasticJob&) = delete;

  // Joins the next generation; `step`: how far this process's state is (-1: it has none).
  std::unique_ptr<Job> form(int64_t step);
  // Ends the generation formed last; the first reason recorded stays and is returned.
  std::string end(const std::string& reason);
  // Ends the generation formed last and the job (training is done): a process that arrives later
  // fails at once (kUnavailable) instead of starting a job of its own.
  void finish(const std::string& reason);
  bool newcomer_waiting();
  int64_t generation() const;  // -1 before the first form()

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringd
