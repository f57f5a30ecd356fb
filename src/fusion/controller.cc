#include "fusion/controller.h"

#include <algorithm>

#include "common/logging.h"
#include "fusion/message_exchange.h"
#include "fusion/rank_states.h"
#include "ringd/error.h"

namespace ringd::fusion {
namespace {

constexpr size_t kFlagRequests = 0;  // 0 = some rank has requests for the coordinator
constexpr size_t kFlagShutdown = 1;  // 0 = some rank is shutting down
constexpr size_t kFlagState = 2;     // 0 = every rank sends its state this cycle
constexpr size_t kFlagSlots = 3;     // then one byte per cache slot
constexpr uint8_t kSlotEvict = 0;
constexpr uint8_t kSlotAbsent = 1;
constexpr uint8_t kSlotReady = 2;

}  // namespace

Controller::Controller(Context& ctx, size_t cache_capacity, CollectiveOptions flag_options,
                       std::unique_ptr<StallInspector> stall, std::shared_ptr<WaitTracker> waits,
                       DescribeRank describe)
    : ctx_(ctx),
      cache_(cache_capacity),
      flag_options_(flag_options),
      stall_(std::move(stall)),
      waits_(std::move(waits)),
      describe_(std::move(describe)) {
  if (ctx.rank() == 0) coordinator_.emplace(ctx.size());
}

CycleOutcome Controller::run_cycle(PendingTable& pending, bool shutting_down,
                                   Clock::time_point now) {
  ++cycle_;
  CycleOutcome outcome;
  sort_new_tensors(pending, now);
  std::string stall_reason;
  if (coordinator_ && stall_) stall_reason = stall_->inspect(*coordinator_, now);

  std::vector<uint8_t> flags = flag_vector(pending, shutting_down, !stall_reason.empty(),
                                           wants_state_round(shutting_down, now));
  const size_t lag_offset = flags.size();
  const bool lag_report = lag_report_due_;
  if (lag_report) {
    // Every rank's slot is 0xff but this rank's own: the min gives each slot its owner's bytes.
    flags.resize(lag_offset + 4 * static_cast<size_t>(ctx_.size()), 0xff);
    uint8_t* mine = flags.data() + lag_offset + 4 * static_cast<size_t>(ctx_.rank());
    for (int byte = 0; byte < 4; ++byte) mine[byte] = (lag_report_us_ >> (8 * byte)) & 0xff;
    lag_report_due_ = false;
  }
  const Clock::time_point entered = Clock::now();
  allreduce(ctx_, flags.data(), flags.data(), flags.size(), DataType::kUInt8, ReduceOp::kMin,
            flag_options_);
  const std::chrono::duration<double> waited = Clock::now() - entered;
  if (lag_report) report_lags(flags.data() + lag_offset, outcome, now);
  flags.resize(lag_offset);

  // Slots some rank invalidated leave every cache; tensors here that hoped to run from them go
  // to the coordinator in this cycle's round (the invalidating rank forces one).
  for (size_t slot = 0; slot + kFlagSlots < flags.size(); ++slot) {
    if (flags[kFlagSlots + slot] != kSlotEvict) continue;
    for (auto& [name, tensor] : pending) {
      if (tensor.state == PendingTensor::State::kHit && tensor.slot == static_cast<int>(slot)) {
        tensor.state = PendingTensor::State::kUncached;
        tensor.slot = -1;
      }
    }
    cache_.erase(static_cast<int>(slot));
  }
  take_cached_hits(flags, pending, outcome);

  const bool state_round = flags[kFlagState] == 0;
  if (flags[kFlagRequests] == 0 || state_round) {
    outcome.coordinator_round = true;
    // Cached hits that run this cycle are progress: no deadlock then.
    apply_responses(coordinator_round(pending, stall_reason, now, state_round, shutting_down,
                                      !outcome.ready.empty()),
                    pending, outcome);
  }
  if (flags[kFlagShutdown] == 0 && !outcome.shutdown) {
    outcome.shutdown = true;
    outcome.shutdown_reason = outcome.stopped.empty() ? "another rank's engine was shut down"
                                                      : describe_stopped(outcome.stopped);
  }
  release_groups(outcome);
  if (!outcome.ready.empty() && !outcome.shutdown) measure_lag(waited.count(), now);
  return outcome;
}

void Controller::measure_lag(double wait_s, Clock::time_point now) {
  if (ctx_.size() < 2) return;
  if (lag_cycles_ == 0) lag_window_start_ = now;
  lag_wait_s_ += wait_s;
  if (++lag_cycles_ < kStragglerWindow) return;
  // Every rank closes the window in the same cycle (the cycles that ran something are the same
  // everywhere), so every rank's next flag vector has the same length.
  lag_interval_s_ =
      std::chrono::duration<double>(now - lag_window_start_).count() / (kStragglerWindow - 1);
  lag_report_us_ = static_cast<uint32_t>(
      std::min(lag_wait_s_ / lag_cycles_ * 1e6, static_cast<double>(UINT32_MAX)));
  lag_report_due_ = true;
  lag_wait_s_ = 0;
  lag_cycles_ = 0;
}

void Controller::report_lags(const uint8_t* slots, CycleOutcome& outcome, Clock::time_point now) {
  std::vector<double> waits(static_cast<size_t>(ctx_.size()));
  for (size_t rank = 0; rank < waits.size(); ++rank) {
    uint32_t us = 0;
    for (int byte = 0; byte < 4; ++byte) us |= uint32_t{slots[4 * rank + byte]} << (8 * byte);
    waits[rank] = us * 1e-6;
  }
  outcome.rank_lag_s = rank_lags(waits);
  if (ctx_.rank() != 0 || now < next_straggler_warning_) return;
  const double threshold_s =
      std::max(std::chrono::duration<double>(kStragglerWarning).count(), lag_interval_s_ / 10);
  const std::string warning = describe_straggler(outcome.rank_lag_s, kStragglerWindow, threshold_s);
  if (warning.empty()) return;
  RINGD_LOG(kWarn) << "rank 0: " << warning;
  next_straggler_warning_ = now + std::chrono::minutes(1);
}

void Controller::sort_new_tensors(PendingTable& pending, Clock::time_point now) {
  invalid_slots_.clear();
  for (auto& [name, tensor] : pending) {
    if (tensor.state == PendingTensor::State::kNew) {
      int slot = -1;
      switch (cache_.lookup(name, tensor.params, ctx_.rank(), &slot)) {
        case ResponseCache::Lookup::kHit:
          tensor.state = PendingTensor::State::kHit;
          tensor.slot = slot;
          break;
        case ResponseCache::Lookup::kInvalid:
          invalid_slots_.push_back(slot);
          tensor.state = PendingTensor::State::kUncached;
          break;
        case ResponseCache::Lookup::kMiss: tensor.state = PendingTensor::State::kUncached; break;
      }
    } else if (tensor.state == PendingTensor::State::kHit && !tensor.stall_requested && stall_ &&
               stall_->hit_is_stale(tensor.submitted, now)) {
      // So that rank 0's table shows which ranks lack it (stall_inspector.h).
      invalid_slots_.push_back(tensor.slot);
      tensor.state = PendingTensor::State::kUncached;
      tensor.slot = -1;
      tensor.stall_requested = true;
    }
  }
}

// A state round when this rank shuts down, and every kReportBlockedAfter while it has been
// blocked that long.
bool Controller::wants_state_round(bool shutting_down, Clock::time_point now) {
  if (shutting_down) return true;
  if (!waits_ || ctx_.size() < 2) return false;
  if (now - last_state_report_ < kReportBlockedAfter) return false;
  const std::optional<Clock::time_point> since = waits_->blocked_since(now);
  if (!since || now - *since < kReportBlockedAfter) return false;
  last_state_report_ = now;
  return true;
}

RankState Controller::local_state(const PendingTable& pending, bool shutting_down) const {
  RankState state;
  if (waits_) {
    const WaitTracker::Snapshot waits = waits_->snapshot(Clock::now());
    state.blocked = waits.blocked;
    state.awaited = waits.awaited;
  }
  state.shutting_down = shutting_down;
  if (describe_) describe_(pending, state);
  return state;
}

std::vector<uint8_t> Controller::flag_vector(const PendingTable& pending, bool shutting_down,
                                             bool coordinator_needs_round,
                                             bool report_state) const {
  std::vector<uint8_t> flags(kFlagSlots + cache_.slots(), kSlotAbsent);
  bool requests = coordinator_needs_round;
  for (const auto& [name, tensor] : pending) {
    if (tensor.state == PendingTensor::State::kUncached) requests = true;
    if (tensor.state == PendingTensor::State::kHit) flags[kFlagSlots + tensor.slot] = kSlotReady;
  }
  for (int slot : invalid_slots_) flags[kFlagSlots + slot] = kSlotEvict;
  flags[kFlagRequests] = requests ? 0 : 1;
  flags[kFlagShutdown] = shutting_down ? 0 : 1;
  flags[kFlagState] = report_state ? 0 : 1;
  return flags;
}

void Controller::take_cached_hits(const std::vector<uint8_t>& flags, PendingTable& pending,
                                  CycleOutcome& outcome) {
  std::vector<const std::string*> by_slot(cache_.slots(), nullptr);
  for (const auto& [name, tensor] : pending) {
    if (tensor.state == PendingTensor::State::kHit) by_slot[tensor.slot] = &name;
  }
  for (size_t slot = 0; slot < by_slot.size(); ++slot) {
    if (flags[kFlagSlots + slot] != kSlotReady) continue;
    if (!by_slot[slot]) {
      RINGD_THROW(kInternal, "rank " << ctx_.rank() << ": response cache slot " << slot
                                     << " is ready on every rank but has no tensor here");
    }
    auto node = pending.extract(*by_slot[slot]);
    outcome.ready.push_back(
        ReadyTensor{std::move(node.mapped()), cache_.response(static_cast<int>(slot)), true});
    cache_.touch(static_cast<int>(slot));
  }
}

ResponseList Controller::coordinator_round(PendingTable& pending, const std::string& stall_reason,
                                           Clock::time_point now, bool state_round,
                                           bool shutting_down, bool progress) {
  std::vector<PendingTensor*> uncached;
  for (auto& [name, tensor] : pending) {
    if (tensor.state == PendingTensor::State::kUncached) uncached.push_back(&tensor);
  }
  std::sort(uncached.begin(), uncached.end(),
            [](const PendingTensor* a, const PendingTensor* b) { return a->seq < b->seq; });
  std::vector<Request> requests;
  for (PendingTensor* tensor : uncached) {
    const auto waited =
        std::chrono::duration_cast<std::chrono::microseconds>(now - tensor->submitted);
    requests.push_back(Request{tensor->name, tensor->params,
                               static_cast<uint64_t>(std::max<int64_t>(0, waited.count()))});
    tensor->state = PendingTensor::State::kSent;
  }
  const std::chrono::milliseconds timeout =
      flag_options_.timeout.count() > 0 ? flag_options_.timeout : ctx_.timeout();
  std::optional<RankState> mine;
  if (state_round) mine = local_state(pending, shutting_down);
  try {
    const std::vector<std::string> lists = gather_to_root(
        ctx_, encode_requests(ctx_.rank(), requests, mine ? &*mine : nullptr), timeout);
    std::string answer;
    if (coordinator_) {
      std::vector<RankState> states;
      for (int rank = 0; rank < ctx_.size(); ++rank) {
        RequestList from;
        if (rank == 0) {
          from.requests = requests;
          from.state = mine;
        } else {
          from = decode_request_list(lists[rank], rank);
        }
        for (const Request& request : from.requests) coordinator_->add(rank, request, now);
        if (state_round) {
          if (!from.state) {
            RINGD_THROW(kProtocol, "rank " << rank
                                           << " sent no state in a state round; every "
                                              "rank must run the same ringd version");
          }
          states.push_back(std::move(*from.state));
        }
      }
      ResponseList list;
      list.responses = coordinator_->take_ready();
      list.shutdown = !stall_reason.empty();
      list.shutdown_reason = stall_reason;
      for (size_t rank = 0; rank < states.size(); ++rank) {
        if (states[rank].shutting_down) {
          list.stopped.push_back(StoppedRank{static_cast<int>(rank), std::move(states[rank])});
        }
      }
      if (list.stopped.empty() && list.responses.empty() && !progress) {
        list.deadlock = find_deadlock(states);
        if (!list.deadlock.empty()) coordinator_->clear();
      }
      answer = encode_responses(list);
    }
    return decode_responses(broadcast_from_root(ctx_, answer, timeout), ctx_.size());
  } catch (const Error& error) {
    const std::string message = "rank " + std::to_string(ctx_.rank()) + ": negotiation cycle " +
                                std::to_string(cycle_) +
                                " (request/response round with rank 0) failed: " + error.what();
    ctx_.abort(message);
    throw Error(error.code(), message);
  }
}

void Controller::apply_responses(const ResponseList& list, PendingTable& pending,
                                 CycleOutcome& outcome) {
  for (const Response& response : list.responses) {
    const auto it = pending.find(response.name);
    if (it == pending.end() || it->second.state != PendingTensor::State::kSent) {
      RINGD_THROW(kInternal, "rank " << ctx_.rank() << ": rank 0 answered tensor '" << response.name
                                     << "', which this rank has not requested");
    }
    auto node = pending.extract(it);
    if (!response.ok()) {
      outcome.failed.push_back({std::move(node.mapped()), ErrorCode::kMismatch,
                                "rank " + std::to_string(ctx_.rank()) + ": " + response.error});
      continue;
    }
    const std::string evicted = cache_.put(response);
    if (!evicted.empty()) {
      const auto e = pending.find(evicted);
      if (e != pending.end() && e->second.state == PendingTensor::State::kHit) {
        e->second.state = PendingTensor::State::kUncached;  // asks rank 0 next cycle
        e->second.slot = -1;
      }
    }
    outcome.ready.push_back(ReadyTensor{std::move(node.mapped()), response, false});
  }
  if (list.shutdown) {
    outcome.shutdown = true;
    outcome.stalled = true;
    outcome.shutdown_reason = list.shutdown_reason;
  }
  outcome.stopped = list.stopped;
  if (!list.deadlock.empty()) {
    // Every rank fails everything it has pending (rank 0 found nothing pending everywhere).
    const std::string prefix = "rank " + std::to_string(ctx_.rank()) + ": tensor '";
    const auto fail = [&](PendingTensor tensor) {
      std::string message = prefix + tensor.name + "' cannot complete: " + list.deadlock;
      outcome.failed.push_back({std::move(tensor), ErrorCode::kDeadlock, std::move(message)});
    };
    for (auto& [name, tensor] : pending) fail(std::move(tensor));
    pending.clear();
    for (PendingTensor& tensor : take_waiting_group_members()) fail(std::move(tensor));
  }
}

std::vector<PendingTensor> Controller::take_waiting_group_members() {
  std::vector<PendingTensor> members;
  for (auto& [name, group] : groups_) {
    for (ReadyTensor& tensor : group.ready) members.push_back(std::move(tensor.tensor));
  }
  groups_.clear();
  return members;
}

// Grouped tensors run only with their whole group; once a member failed, the others fail too.
void Controller::release_groups(CycleOutcome& outcome) {
  std::vector<ReadyTensor> ready;
  std::vector<std::string> touched;
  const auto group_of = [&](const TensorParams& params) -> GroupState& {
    if (std::find(touched.begin(), touched.end(), params.group) == touched.end()) {
      touched.push_back(params.group);
    }
    GroupState& group = groups_[params.group];
    group.size = params.group_size;
    return group;
  };
  for (ReadyTensor& tensor : outcome.ready) {
    if (tensor.tensor.params.group_size == 0) {
      ready.push_back(std::move(tensor));
    } else {
      group_of(tensor.tensor.params).ready.push_back(std::move(tensor));
    }
  }
  for (const FailedTensor& failed : outcome.failed) {
    if (failed.tensor.params.group_size == 0 || failed.code == ErrorCode::kDeadlock) continue;
    GroupState& group = group_of(failed.tensor.params);
    if (group.failed++ == 0) group.error = failed.message;
  }
  for (const std::string& name : touched) {
    GroupState& group = groups_[name];
    if (group.failed == 0) {
      if (group.ready.size() < group.size) continue;  // wait for the rest of the group
      for (ReadyTensor& tensor : group.ready) ready.push_back(std::move(tensor));
      groups_.erase(name);
      continue;
    }
    for (ReadyTensor& tensor : group.ready) {
      std::string message = "rank " + std::to_string(ctx_.rank()) + ": tensor '" +
                            tensor.tensor.name + "' of group '" + name +
                            "' cannot run because another member failed: " + group.error;
      outcome.failed.push_back(
          {std::move(tensor.tensor), ErrorCode::kMismatch, std::move(message)});
      ++group.released;
    }
    group.ready.clear();
    if (group.failed + group.released >= group.size) groups_.erase(name);
  }
  outcome.ready = std::move(ready);
}

}  // namespace ringd::fusion
