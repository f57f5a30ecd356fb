// An elastic job's transport, generation after generation (issue 39; the membership protocol is
// rendezvous/elastic_membership.h): form() joins the next generation through the store and
// connects its ranks over tcp, every key of the generation under its own prefix and every
// connection carrying the generation's job id, so that nothing of an older generation (a rank cut
// off and come back, a late HELLO) can reach a newer one. When a rank is lost the survivors'
// collectives fail (kPeerLost, or kTimeout for a cut link) as in any job; each survivor then
// destroys its Context, calls end() and form() again, and the job goes on among them. A process
// started later with the same options waits in the next generation; the running ranks see it
// (newcomer_waiting(), at a step boundary), end theirs, and form the next one with it.
//
// What moves from generation to generation (parameters, optimizer state, the step) is the
// caller's: rank 0 of every generation is a process that holds the newest step
// (Generation::members[0].step), the one to take state from.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "rendezvous/elastic_membership.h"
#include "ringd/store.h"
#include "ringd/tcp.h"
#include "ringd/transport.h"

namespace ringd::job {

// An elastic job's rendezvous at "host:port": the store is served here when this process can bind
// that address (the first process on `host`: the job ends if that one is lost, as torchrun's
// c10d rendezvous), else joined. The job's identity (job/topology.h: RINGD_JOB_ID, the secret, ...)
// is required, so that a process of another job can never join. Throws kInvalidArgument without
// one, or for a malformed address.
struct ElasticRendezvous {
  std::unique_ptr<TcpStoreServer> server;  // this process serves the store
  std::unique_ptr<TcpStore> store;
  std::string job_id;
  std::string secret;  // what the job authenticates with ("" = none, warned)
};
ElasticRendezvous open_elastic_rendezvous(const std::string& address,
                                          std::chrono::milliseconds timeout);

struct ElasticJobOptions {
  std::string job_id;  // every process of the job names the same (JobIdentity)
  rendezvous::ElasticBounds bounds;
  // The connections: interface, port, secret, timeout, congestion. job_id/job_source are set per
  // generation.
  TcpOptions tcp;
  std::string who;  // how this process is named to the others ("" = pid and host)
};

struct ElasticGeneration {
  rendezvous::Generation membership;
  std::unique_ptr<Context> ctx;
  int rank() const { return membership.rank; }
  int size() const { return membership.size(); }
};

class ElasticJob {
 public:
  // `store` outlives the job. Throws kInvalidArgument for unusable options.
  ElasticJob(Store& store, ElasticJobOptions options);

  // Joins the next generation with `step` (the newest step whose state this process holds; -1:
  // none) and connects its ranks. A generation whose ranks cannot all connect (one died between
  // the close and the connection) is ended and the next one formed, within bounds.timeout in all;
  // then the last error, naming the generation.
  ElasticGeneration form(int64_t step);

  // Ends the generation formed last (the first reason recorded stays; returns it). Ranks that
  // have not noticed a loss yet find out through their own failing collectives.
  std::string end(const std::string& reason);

  // Ends the generation formed last and the job (training is done): a process that arrives
  // later fails at once with kUnavailable saying so.
  void finish(const std::string& reason);

  // Whether a process waits to join (call at a step boundary: all ranks must agree to end the
  // generation, e.g. through a vote in the step's collectives).
  bool newcomer_waiting();

  const rendezvous::ElasticBounds& bounds() const { return options_.bounds; }
  // The generation formed last (-1 before the first form()).
  int64_t generation() const { return generation_; }

 private:
  Store& store_;
  ElasticJobOptions options_;
  rendezvous::ElasticMembership membership_;
  rendezvous::ElasticMember self_;
  int64_t generation_ = -1;
};

// A process's part of the elastic job at `address`: the rendezvous (open_elastic_rendezvous) and
// the ElasticJob over it, bounded by min/max ranks and `timeout` (0 = RINGD_TIMEOUT; the settle
// time is RINGD_ELASTIC_SETTLE_S), connecting over `interface`/`tcp_port` with the job's secret.
struct ElasticProcess {
  ElasticRendezvous rendezvous;
  std::unique_ptr<ElasticJob> job;  // over rendezvous.store: destroyed first
};
ElasticProcess open_elastic_process(const std::string& address, int min_ranks, int max_ranks,
                                    std::chrono::milliseconds timeout, const std::string& interface,
                                    int tcp_port);

}  // namespace ringd::job
