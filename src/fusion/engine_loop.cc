// The engine's background thread: sleep until there is something to negotiate, run a cycle
// (negotiate, then execute what is ready everywhere), complete handles, repeat.
//
//   idle ------- submission ----------------> cycle at once
//     |                                          |
//     +-- heartbeat (no work for a while) -->  cycle (joins the others' cycle, if they wait)
//   tensors still waiting after a cycle ----> next cycle at last start + RINGD_CYCLE_TIME_MS,
//                                              or at once when the fusion buffer's worth is queued
//
// The thread never polls: it sleeps on a condition variable with a deadline, and inside a cycle
// it sleeps in the transport's waits. Ranks with waiting tensors are always inside (or about to
// enter) the next cycle, so a rank that submits the tensor they wait for completes that cycle at
// once; a rank with nothing to do only needs to show up for the heartbeat.
#include <sstream>

#include "common/logging.h"
#include "fusion/engine_impl.h"
#include "fusion/rank_states.h"
#include "ringd/error.h"

namespace ringd {

using fusion::Clock;
using fusion::PendingTensor;
using fusion::ReadyTensor;

void Engine::Impl::run() {
  Clock::time_point last_start{};
  Clock::time_point last_end = Clock::now();
  while (true) {
    bool shutting_down = false;
    {
      std::unique_lock<std::mutex> lock(mutex);
      wait_for_cycle(lock, last_start, last_end);
      for (PendingTensor& tensor : incoming) {
        const std::string name = tensor.name;
        pending.emplace(name, std::move(tensor));
      }
      incoming.clear();
      incoming_bytes = 0;
      shutting_down = stop_requested;
    }
    last_start = Clock::now();
    // On failure the ranks' cycles are out of step: abort the Context (a no-op when the failed
    // collective already did) so the peers learn why instead of waiting for their timeout.
    try {
      if (run_cycle(shutting_down, last_start)) return;
    } catch (const Error& error) {
      ctx.abort(error.what());
      fail_everything(std::make_exception_ptr(error));
      return;
    } catch (const std::exception& error) {
      const std::string message =
          "rank " + std::to_string(ctx.rank()) + ": the fusion engine failed: " + error.what();
      ctx.abort(message);
      fail_everything(std::make_exception_ptr(Error(ErrorCode::kInternal, message)));
      return;
    }
    last_end = Clock::now();
  }
}

void Engine::Impl::wait_for_cycle(std::unique_lock<std::mutex>& lock, Clock::time_point last_start,
                                  Clock::time_point last_end) {
  while (!stop_requested) {
    const auto now = Clock::now();
    if (!incoming.empty() || !pending.empty()) {
      const auto earliest = last_start + config.cycle_time;
      const bool buffer_full =
          config.fusion_threshold_bytes > 0 && incoming_bytes >= config.fusion_threshold_bytes;
      if (now >= earliest || buffer_full) return;
      wake.wait_until(lock, earliest);
    } else {
      const auto heartbeat = last_end + config.heartbeat;
      if (now >= heartbeat) return;
      idle_waiting = true;
      wake.wait_until(lock, heartbeat);
      idle_waiting = false;
    }
  }
}

// Returns true when the engine stopped (every rank stops after the same cycle).
bool Engine::Impl::run_cycle(bool shutting_down, Clock::time_point start) {
  fusion::CycleOutcome outcome = controller->run_cycle(pending, shutting_down, start);
  const auto negotiated = Clock::now();
  const std::chrono::duration<double> negotiation = negotiated - start;
  uint64_t cycle = 0;
  {
    // Counted before any handle completes, so a caller that waited sees its cycle counted.
    std::lock_guard<std::mutex> lock(mutex);
    cycle = ++stats.cycles;
    stats.coordinator_rounds += outcome.coordinator_round ? 1 : 0;
    if (!outcome.rank_lag_s.empty()) stats.rank_lag_s = outcome.rank_lag_s;
    stats.negotiation_s += negotiation.count();
  }
  for (fusion::FailedTensor& failed : outcome.failed) {
    complete(failed.tensor, std::make_exception_ptr(Error(failed.code, failed.message)));
  }
  if (timeline) {
    for (const ReadyTensor& ready : outcome.ready) {
      timeline->span(ready.tensor.name, "negotiate", ready.tensor.submitted, negotiated,
                     {{"via", std::string(ready.from_cache ? "cache" : "coordinator")}});
    }
  }
  fusion::Executor::Counts counts;
  try {
    counts = executor->run(
        outcome.ready,
        [this](ReadyTensor& ready, std::exception_ptr error) {
          if (!error) {
            std::lock_guard<std::mutex> lock(mutex);
            (ready.from_cache ? stats.cache_hits : stats.cache_misses) += 1;
            stats.bytes += ready.tensor.tensor.bytes();
          }
          complete(ready.tensor, error);
        },
        [this](size_t members, size_t, const fusion::Executor::Traffic& traffic) {
          std::lock_guard<std::mutex> lock(mutex);
          ++stats.buckets;
          if (members > 1) stats.fused_tensors += members;
          stats.compressed_bytes += traffic.compressed_bytes;
          stats.dgc_sparse_tensors += traffic.sparse_tensors;
        });
  } catch (...) {
    const std::exception_ptr error = std::current_exception();
    for (ReadyTensor& ready : outcome.ready) {
      if (ready.tensor.handle) complete(ready.tensor, error);
    }
    throw;
  }
  record_cycle(cycle, outcome, counts, start, negotiated, Clock::now());
  if (!outcome.shutdown) return false;
  const ErrorCode code = outcome.stalled ? ErrorCode::kTimeout : ErrorCode::kPeerLost;
  const std::exception_ptr error = std::make_exception_ptr(
      Error(code, "rank " + std::to_string(ctx.rank()) +
                      ": the fusion engine has stopped: " + outcome.shutdown_reason));
  {
    // Stopped before any waiter wakes, so that what it submits next fails at once.
    std::lock_guard<std::mutex> lock(mutex);
    if (!stopped) stopped = error;
  }
  // Tensors left pending here by ranks that shut down: say how often each of them completed it.
  std::vector<fusion::StoppedRank> others;
  for (const fusion::StoppedRank& stopped_rank : outcome.stopped) {
    if (stopped_rank.rank != ctx.rank()) others.push_back(stopped_rank);
  }
  if (!outcome.stalled && !others.empty()) {
    std::vector<std::exception_ptr> errors;
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (const auto& [name, tensor] : pending) {
        errors.push_back(std::make_exception_ptr(
            Error(ErrorCode::kPeerLost,
                  fusion::stopped_tensor_message(ctx.rank(), name, done_count(name), others))));
      }
    }
    auto error_of = errors.begin();
    for (auto& [name, tensor] : pending) complete(tensor, *error_of++);
    pending.clear();
  }
  fail_everything(error);
  return true;
}

void Engine::Impl::record_cycle(uint64_t cycle, const fusion::CycleOutcome& outcome,
                                const fusion::Executor::Counts& counts, Clock::time_point start,
                                Clock::time_point negotiated, Clock::time_point end) {
  const std::chrono::duration<double> negotiation = negotiated - start;
  const std::chrono::duration<double> execution = end - negotiated;
  {
    std::lock_guard<std::mutex> lock(mutex);
    stats.execution_s += execution.count();
    if (config.record_cycles) {
      stats.cycle_log.push_back({negotiation.count() * 1e6, execution.count() * 1e6});
    }
  }
  if (!timeline) return;
  uint64_t hits = 0;
  for (const ReadyTensor& ready : outcome.ready) hits += ready.from_cache ? 1 : 0;
  timeline->span("cycles", "negotiate", start, negotiated,
                 {{"coordinator round", static_cast<int64_t>(outcome.coordinator_round)}});
  timeline->span("cycles", "cycle", start, end,
                 {{"cycle", static_cast<int64_t>(cycle)},
                  {"ready", static_cast<int64_t>(outcome.ready.size())},
                  {"cache hits", static_cast<int64_t>(hits)},
                  {"buckets", static_cast<int64_t>(counts.buckets)},
                  {"bytes", static_cast<int64_t>(counts.bytes)}});
  timeline->flush();
}

void Engine::Impl::complete(PendingTensor& tensor, std::exception_ptr error) {
  if (!tensor.handle) return;
  {
    // The name is free again before the waiter wakes, so it may resubmit at once.
    std::lock_guard<std::mutex> lock(mutex);
    in_flight.erase(tensor.name);
    if (error) {
      ++stats.tensors_failed;
    } else {
      ++stats.tensors_done;
      const auto it = done_by_name.find(tensor.name);
      if (it != done_by_name.end()) {
        ++it->second;
      } else if (done_by_name.size() < kCountedNames) {
        done_by_name.emplace(tensor.name, 1);
      }
    }
  }
  if (timeline) timeline->instant(tensor.name, error ? "failed" : "done", Clock::now());
  tensor.handle->finish(error);
  tensor.handle.reset();
}

// The engine stops: every tensor not yet done fails with `error`, and later submissions throw it.
void Engine::Impl::fail_everything(std::exception_ptr error) {
  std::vector<PendingTensor> queued;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!stopped) stopped = error;
    queued.swap(incoming);
    incoming_bytes = 0;
  }
  for (PendingTensor& tensor : queued) complete(tensor, error);
  for (auto& [name, tensor] : pending) complete(tensor, error);
  pending.clear();
  for (PendingTensor& tensor : controller->take_waiting_group_members()) complete(tensor, error);
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    RINGD_LOG(kDebug) << "rank " << ctx.rank() << ": fusion engine stopped: " << e.what();
  }
}

}  // namespace ringd
