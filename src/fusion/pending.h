// A submitted tensor on its way through the background thread, and where it stands in the
// negotiation. Owned by the background thread (no locks).
//
//   kNew --cache hit--> kHit (announced by its slot's byte every cycle) ----------+
//     |                   | invalidated, evicted or stale                         +--> ready
//     +--cache miss--> kUncached (to send) --sent--> kSent (in rank 0's table) ---+
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fusion/handle_state.h"
#include "fusion/tensor_params.h"
#include "ringd/engine.h"

namespace ringd::fusion {

using Clock = std::chrono::steady_clock;

struct PendingTensor {
  enum class State { kNew, kHit, kUncached, kSent };

  uint64_t seq = 0;  // submission order on this rank
  std::string name;
  TensorParams params;
  Tensor tensor;
  std::vector<void*> other_devices;  // Submission::other_devices (engines over local devices)
  std::shared_ptr<detail::HandleState> handle;
  Clock::time_point submitted;
  State state = State::kNew;
  int slot = -1;                 // kHit: the response cache slot
  bool stall_requested = false;  // a stale hit already sent back to the coordinator once
};

using PendingTable = std::map<std::string, PendingTensor>;

// A tensor every rank has submitted, with the agreed answer: what the executor runs.
struct ReadyTensor {
  PendingTensor tensor;
  Response response;
  bool from_cache = false;
};

}  // namespace ringd::fusion
