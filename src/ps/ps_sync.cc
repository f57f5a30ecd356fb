#include "ps/ps_sync.h"

#include <chrono>
#include <exception>

#include "common/tunables.h"
#include "net/handshake.h"
#include "ps/frame.h"
#include "ps/server_link.h"
#include "ringd/error.h"

namespace ringd::ps {

PsSync::PsSync(PsSyncOptions options) : options_(std::move(options)) {
  RINGD_CHECK_ARG(!options_.servers.empty(),
                  "parameter-server mode needs at least one server "
                  "address (--ps-servers or co-located servers)");
  RINGD_CHECK_ARG(options_.workers >= 1 && options_.rank >= 0 && options_.rank < options_.workers,
                  "parameter-server worker: rank " << options_.rank << " of " << options_.workers);
  if (options_.timeout.count() <= 0) options_.timeout = tunables().timeout;
  options_.secret = net::resolve_secret(options_.secret);
}

PsSync::~PsSync() {
  // During unwinding the step did not finish: let the servers see a lost worker instead of a clean
  // goodbye, so the other workers learn about it at once.
  const bool clean = !failed_ && std::uncaught_exceptions() == 0;
  for (auto& link : links_) {
    if (!clean) break;
    try {
      link->wait_idle();
      link->say_bye();
    } catch (const Error&) {  // already reported to the trainer, or nothing left to say
    }
  }
  if (!clean) {
    const std::string who = "worker " + std::to_string(options_.rank);
    const std::string why = failure_.empty()
                                ? who +
                                      " stopped in the middle of the job (an error outside "
                                      "parameter-server mode; its log says which)"
                                : who + " gave up: " + failure_;
    for (auto& link : links_) link->give_up(why);
  }
  links_.clear();
}

void PsSync::note_failure() {
  if (failed_) return;
  failed_ = true;
  try {
    throw;
  } catch (const std::exception& error) {
    failure_ = error.what();
  } catch (...) {
    failure_ = "an unknown error";
  }
}

void PsSync::initialize(const std::vector<model::ParameterView>& params) {
  RINGD_CHECK_ARG(links_.empty(), "PsSync::initialize called twice");
  params_ = params;
  JobDescription job;
  job.set_worker_rank(options_.rank);
  job.set_workers(options_.workers);
  job.set_servers(static_cast<int>(options_.servers.size()));
  job.set_sharding(static_cast<uint32_t>(options_.sharding));
  job.set_asynchronous(options_.asynchronous);
  job.set_momentum(options_.sgd.momentum);
  job.set_weight_decay(options_.sgd.weight_decay);
  std::vector<size_t> counts;
  for (const model::ParameterView& view : params_) {
    TensorInfo* tensor = job.add_tensors();
    tensor->set_name(view.name);
    tensor->set_count(view.count);
    counts.push_back(view.count);
  }
  const int servers = static_cast<int>(options_.servers.size());
  server_of_ = assign_shards(counts, servers, options_.sharding);
  try {
    for (int s = 0; s < servers; ++s) {
      job.set_server_index(s);
      links_.push_back(std::make_unique<ServerLink>(
          s, options_.servers[static_cast<size_t>(s)], options_.servers_source, job, &params_,
          tensors_of(server_of_, s), options_.secret, options_.timeout));
    }
    if (options_.rank == 0) {
      for (auto& link : links_) link->send_initial_values();
    }
    pull_all(-1);
  } catch (...) {
    note_failure();
    throw;
  }
}

void PsSync::gradient_ready(size_t index, const model::StepInfo& step) {
  RINGD_CHECK_ARG(index < params_.size(), "PsSync: gradient_ready(" << index << ") but the model "
                                                                    << "has " << params_.size()
                                                                    << " parameters");
  try {
    links_[static_cast<size_t>(server_of_[index])]->push(index, step.step, step.learning_rate);
  } catch (...) {
    note_failure();
    throw;
  }
}

void PsSync::finish_step(const model::StepInfo& step) {
  const auto start = std::chrono::steady_clock::now();
  try {
    pull_all(step.step);
  } catch (...) {
    note_failure();
    blocked_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    throw;
  }
  blocked_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void PsSync::pull_all(int64_t after_step) {
  // Every link is waited for, even after one failed, so that the error reported is the root
  // cause: a server this worker lost itself, rather than another server's news that some other
  // worker was lost (which is what a dead server makes of the other workers a moment later).
  std::exception_ptr seen_here;
  std::exception_ptr relayed;
  auto record = [&](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const RemoteError&) {
      if (!relayed) relayed = error;
    } catch (...) {
      if (!seen_here) seen_here = error;
    }
  };
  std::vector<char> queued(links_.size(), 0);
  for (size_t s = 0; s < links_.size(); ++s) {
    try {
      links_[s]->pull(after_step);  // all pulls go out before any is waited for
      queued[s] = 1;
    } catch (...) {
      record(std::current_exception());
    }
  }
  for (size_t s = 0; s < links_.size(); ++s) {
    if (!queued[s]) continue;
    try {
      links_[s]->wait_idle();
    } catch (...) {
      record(std::current_exception());
    }
  }
  if (seen_here) std::rethrow_exception(seen_here);
  if (relayed) std::rethrow_exception(relayed);
}

}  // namespace ringd::ps
