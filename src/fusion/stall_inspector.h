// The stall inspector: finds tensors that some ranks submitted and others did not, and says which.
//
// Rank 0 knows, from its coordinator table, who requested what. A tensor that runs from the
// response cache is not in that table (ranks announce it by one byte), so every rank sends a
// cached tensor that has waited longer than the warning back to the coordinator once
// (hit_is_stale); from then on the table shows which ranks lack it. Every RINGD_STALL_WARNING_S
// rank 0 logs (and hands to EngineOptions::on_stall) the tensors that waited longer, with the
// ranks that submitted them and the ranks they wait on; past RINGD_STALL_SHUTDOWN_S it asks every
// rank to fail them and stop.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "fusion/coordinator.h"
#include "ringd/engine.h"

namespace ringd::fusion {

class StallInspector {
 public:
  StallInspector(int rank, double warning_s, double shutdown_s,
                 std::function<void(const StallReport&)> on_stall);

  bool enabled() const { return warning_.count() > 0 || shutdown_.count() > 0; }
  // Every rank: a cached tensor submitted at `submitted` should go back to the coordinator.
  bool hit_is_stale(Clock::time_point submitted, Clock::time_point now) const;
  // Rank 0, once per cycle: reports stalls (at most once per warning period) and returns the
  // reason to shut down ("" = keep going).
  std::string inspect(const Coordinator& coordinator, Clock::time_point now);

 private:
  int rank_;
  std::chrono::duration<double> warning_;
  std::chrono::duration<double> shutdown_;
  std::function<void(const StallReport&)> on_stall_;
  Clock::time_point next_report_{};
};

// "tensor 'b' has waited 12.0 s: submitted by rank 0, 1; waiting on rank 2" lines.
std::string describe_stalls(const std::vector<StalledTensor>& tensors);

}  // namespace ringd::fusion
