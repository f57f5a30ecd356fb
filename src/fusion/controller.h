// Negotiation: which submitted tensors every rank has, in one order that all ranks share.
//
// One cycle, on every rank (the same cycles, in step):
//
//   1. sort new tensors: cached answer fits -> kHit (slot s);  name cached with other
//      parameters -> invalidate slot s, kUncached;  unknown -> kUncached
//   2. flag vector, one byte each, combined by ONE allreduce with op min:
//        [0] 0 = I have requests for the coordinator     [1] 0 = I am shutting down
//        [2] 0 = every rank, send your state this round (I shut down, or I have been blocked)
//        [3+s]  2 = my tensor in slot s is ready   1 = not here   0 = evict slot s
//      min over ranks: slot byte 2 -> ready on every rank; 0 -> every rank evicts it
//   3. only if byte [0] or [2] came out 0 (a new, changed or stale tensor somewhere, or a state
//      report asked for):
//        every rank --RequestList (protobuf)--> rank 0 --ResponseList--> every rank
//      rank 0 answers the tensors every rank has now requested (or a mismatch error)
//   4. ready list = cached hits in slot order, then the coordinator's answers in its order;
//      the answers enter every rank's cache in that order (so slots stay identical)
//
//   steady state (every tensor cached): step 2 only: one allreduce of 3 + slots bytes per cycle
//
// Grouped tensors wait (in `groups_`, identical on every rank) until their whole group is ready.
//
// Deadlocks and shutdowns. A rank asks for a state round (byte [2]) when its engine shuts down,
// and every kReportBlockedAfter while it has been *blocked* (wait_tracker.h: every thread that
// submits waits on a handle) that long in one stretch. In that round every rank's
// RequestList carries its RankState (blocked?, awaited and pending tensors, counts), all from the
// same cycle, so rank 0 sees one consistent picture:
//   * a rank shutting down: its state (reason, counts) goes back to every rank in the
//     ResponseList, and each survivor fails its pending tensors naming that rank, how often it
//     completed the tensor, and why it stopped (rank_states.h);
//   * every rank blocked and no tensor pending on all of them: a deadlock (nothing can run, and
//     nobody can submit until something runs): every rank fails all its pending tensors with
//     kDeadlock, naming what each rank waits on. The engines keep running.
// A rank that waits only briefly (a synchronous collective that completes) never asks, so the
// steady state costs nothing more than the flag byte.
//
// Stragglers. Every rank times its own wait inside the flag allreduce: the last rank to arrive
// waits least, the first most. Over the cycles that ran something (the same cycles on every
// rank) each rank averages its wait; after every kStragglerWindow such cycles, the next cycle's
// flag vector carries 4 more bytes per rank: each rank's mean (microseconds) in its own slot and
// 0xff in the others', so the same min allreduce tells every rank everyone's (no allreduce of its
// own: the 1% it cost a stream of 4 KB allreduces). A rank's lag is the median wait minus its
// own: how long after the median rank it was ready. Rank 0 warns (at
// most once a minute) when a rank lags by kStragglerWarning or more and by at least a tenth of
// the window's mean interval between those cycles (so a 20 ms lag in 5 s steps is no news).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fusion/coordinator.h"
#include "fusion/pending.h"
#include "fusion/response_cache.h"
#include "fusion/stall_inspector.h"
#include "fusion/wait_tracker.h"
#include "ringd/collectives.h"
#include "ringd/error.h"
#include "ringd/transport.h"

namespace ringd::fusion {

struct FailedTensor {
  PendingTensor tensor;
  ErrorCode code = ErrorCode::kMismatch;
  std::string message;
};

struct CycleOutcome {
  std::vector<ReadyTensor> ready;  // execution order, identical on every rank
  // Tensors that fail this cycle (a mismatch, a failed group member, a deadlock).
  std::vector<FailedTensor> failed;
  bool shutdown = false;  // every rank stops after this cycle
  bool stalled = false;   // the shutdown is the stall inspector's (kTimeout, not kPeerLost)
  std::string shutdown_reason;
  std::vector<StoppedRank> stopped;  // the ranks that shut down, with their states
  bool coordinator_round = false;
  // Set every kStragglerWindow cycles that ran something: how long after the median rank each
  // rank reached those cycles, on average (seconds, index = rank; identical on every rank).
  std::vector<double> rank_lag_s;
};

// This rank's part of a state round: the engine fills in everything but `blocked` and
// `awaited` (its counts, what is pending, why it shuts down).
using DescribeRank = std::function<void(const PendingTable& pending, RankState& state)>;

class Controller {
 public:
  static constexpr std::chrono::milliseconds kReportBlockedAfter{1000};
  static constexpr int kStragglerWindow = 20;
  // Rank 0 warns when a rank lags by this much and by a tenth of the window's mean cycle interval.
  static constexpr std::chrono::milliseconds kStragglerWarning{20};

  Controller(Context& ctx, size_t cache_capacity, CollectiveOptions flag_options,
             std::unique_ptr<StallInspector> stall, std::shared_ptr<WaitTracker> waits = nullptr,
             DescribeRank describe = nullptr);

  // Runs one cycle over the tensors in `pending` (which it updates: ready and failed tensors
  // leave it). Every rank must call it the same number of times. Throws ringd::Error on
  // transport failures (after aborting the Context).
  CycleOutcome run_cycle(PendingTable& pending, bool shutting_down, Clock::time_point now);

  const ResponseCache& cache() const { return cache_; }
  // Group members that are ready everywhere but wait for the rest of their group (to fail them
  // when the engine stops).
  std::vector<PendingTensor> take_waiting_group_members();

 private:
  void sort_new_tensors(PendingTable& pending, Clock::time_point now);
  std::vector<uint8_t> flag_vector(const PendingTable& pending, bool shutting_down,
                                   bool coordinator_needs_round, bool report_state) const;
  bool wants_state_round(bool shutting_down, Clock::time_point now);
  RankState local_state(const PendingTable& pending, bool shutting_down) const;
  void take_cached_hits(const std::vector<uint8_t>& flags, PendingTable& pending,
                        CycleOutcome& outcome);
  ResponseList coordinator_round(PendingTable& pending, const std::string& stall_reason,
                                 Clock::time_point now, bool state_round, bool shutting_down,
                                 bool progress);
  void apply_responses(const ResponseList& list, PendingTable& pending, CycleOutcome& outcome);
  void release_groups(CycleOutcome& outcome);
  void measure_lag(double wait_s, Clock::time_point now);
  // The window's waits, from the flag vector's tail (every rank's slot), into outcome.
  void report_lags(const uint8_t* slots, CycleOutcome& outcome, Clock::time_point now);

  Context& ctx_;
  ResponseCache cache_;
  CollectiveOptions flag_options_;
  std::unique_ptr<StallInspector> stall_;
  std::shared_ptr<WaitTracker> waits_;
  DescribeRank describe_;
  Clock::time_point last_state_report_{};  // when this rank last asked for a state round
  double lag_wait_s_ = 0;                  // this rank's waits in the window's cycles
  int lag_cycles_ = 0;                     // cycles in the window so far
  Clock::time_point lag_window_start_{};
  bool lag_report_due_ = false;  // the next cycle's flags carry the window's waits
  uint32_t lag_report_us_ = 0;   // this rank's mean wait in the window that ended
  double lag_interval_s_ = 0;    // that window's mean interval between its cycles
  Clock::time_point next_straggler_warning_{};
  std::optional<Coordinator> coordinator_;  // rank 0 only
  std::vector<int> invalid_slots_;          // this cycle's slots to evict (sort_new_tensors)
  uint64_t cycle_ = 0;

  struct GroupState {
    uint32_t size = 0;
    std::vector<ReadyTensor> ready;  // members ready everywhere, waiting for the rest
    uint32_t failed = 0;             // members that failed themselves (mismatch)
    uint32_t released = 0;           // members failed because another one did
    std::string error;
  };
  std::map<std::string, GroupState> groups_;  // by group name, identical on every rank
};

}  // namespace ringd::fusion
