#include "job/elastic_job.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "common/host_name.h"
#include "common/logging.h"
#include "common/tunables.h"
#include "job/topology.h"
#include "net/handshake.h"
#include "ringd/error.h"

namespace ringd::job {
namespace {

using Clock = std::chrono::steady_clock;

// Errors after which the next generation may connect: a member that died or was cut off between
// the close and the connection. Others (a wrong secret, a bad option) would fail again.
bool retryable(ErrorCode code) {
  return code == ErrorCode::kTimeout || code == ErrorCode::kPeerLost ||
         code == ErrorCode::kProtocol || code == ErrorCode::kMismatch;
}

}  // namespace

ElasticRendezvous open_elastic_rendezvous(const std::string& address,
                                          std::chrono::milliseconds timeout) {
  std::string host;
  uint16_t port = 0;
  parse_host_port("--rendezvous", address, &host, &port);
  ElasticRendezvous rendezvous;
  rendezvous.secret = net::resolve_secret("");
  Topology alone;
  alone.transport = "tcp";
  rendezvous.job_id = resolve_job_identity(alone, process_environment(), rendezvous.secret).id;
  RINGD_CHECK_ARG(!rendezvous.job_id.empty(),
                  "elastic job at " << address
                                    << ": no job identity: set RINGD_JOB_ID (or RINGD_JOB_SECRET "
                                       "/ RINGD_JOB_SECRET_FILE, which also authenticates) to "
                                       "the same value in every process of the job, so that a "
                                       "process of another job can never join it");
  try {
    rendezvous.server = std::make_unique<TcpStoreServer>(host, port, rendezvous.secret);
    RINGD_LOG(kInfo) << "serving the elastic rendezvous store at " << address
                     << " (the job ends if this process is lost)";
  } catch (const Error&) {
    // Not this machine's address, or another process here serves it already.
  }
  rendezvous.store = std::make_unique<TcpStore>(host, port, rendezvous.secret, timeout);
  return rendezvous;
}

ElasticJob::ElasticJob(Store& store, ElasticJobOptions options)
    : store_(store),
      options_(std::move(options)),
      membership_(store_, options_.job_id, options_.bounds) {
  self_.id = rendezvous::new_member_id();
  self_.who = options_.who.empty() ? "pid " + std::to_string(::getpid()) + " on " + host_name()
                                   : options_.who;
  std::replace(self_.who.begin(), self_.who.end(), '\n', ' ');
}

ElasticGeneration ElasticJob::form(int64_t step) {
  self_.step = step;
  const Clock::time_point deadline = Clock::now() + options_.bounds.timeout;
  for (;;) {
    ElasticGeneration formed;
    formed.membership = membership_.join(self_, generation_ + 1);
    const int64_t g = formed.membership.number;
    generation_ = g;
    TcpOptions tcp = options_.tcp;
    tcp.job_id = rendezvous::generation_job_id(options_.job_id, g);
    tcp.job_source = "elastic job " + options_.job_id + ", generation " + std::to_string(g);
    PrefixStore keys(rendezvous::generation_key_prefix(options_.job_id, g) + "/tcp", store_);
    try {
      formed.ctx = tcp_connect(keys, formed.rank(), formed.size(), tcp);
      return formed;
    } catch (const Error& error) {
      if (!retryable(error.code()) || Clock::now() >= deadline) {
        throw Error(error.code(), "elastic job " + options_.job_id + ", generation " +
                                      std::to_string(g) + " (" + std::to_string(formed.size()) +
                                      " ranks): " + error.what());
      }
      membership_.end(g,
                      "its ranks could not all connect (" + self_.who + ": " + error.what() + ")");
    }
  }
}

std::string ElasticJob::end(const std::string& reason) {
  RINGD_CHECK_ARG(generation_ >= 0,
                  "elastic job " << options_.job_id << ": end() before any generation was formed");
  return membership_.end(generation_, reason);
}

void ElasticJob::finish(const std::string& reason) {
  RINGD_CHECK_ARG(generation_ >= 0, "elastic job " << options_.job_id
                                                   << ": finish() before any generation was "
                                                      "formed");
  membership_.finish(generation_, reason);
}

bool ElasticJob::newcomer_waiting() {
  return generation_ >= 0 && membership_.newcomer_waiting(generation_);
}

ElasticProcess open_elastic_process(const std::string& address, int min_ranks, int max_ranks,
                                    std::chrono::milliseconds timeout, const std::string& interface,
                                    int tcp_port) {
  if (timeout.count() <= 0) timeout = tunables().timeout;
  ElasticProcess process;
  process.rendezvous = open_elastic_rendezvous(address, timeout);
  ElasticJobOptions options;
  options.job_id = process.rendezvous.job_id;
  options.bounds.min_ranks = min_ranks;
  options.bounds.max_ranks = max_ranks;
  options.bounds.timeout = timeout;
  options.bounds.settle =
      std::chrono::milliseconds(std::llround(tunables().elastic_settle_s * 1000));
  options.tcp.interface = interface;
  options.tcp.port = static_cast<uint16_t>(tcp_port);
  options.tcp.secret = process.rendezvous.secret;
  options.tcp.timeout = timeout;
  process.job = std::make_unique<ElasticJob>(*process.rendezvous.store, options);
  return process;
}

}  // namespace ringd::job
