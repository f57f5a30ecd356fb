// What rank 0 makes of every rank's state (negotiation_codec.h's RankState), and the texts the
// ranks fail with: a deadlock (no rank can make progress) and a peer's shutdown.
//
//   deadlock: every rank is blocked (all its submitting threads wait on handles), none shuts
//   down, and no tensor is pending on every rank, so no cycle can complete anything and no
//   thread can submit what the others wait for.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusion/negotiation_codec.h"

namespace ringd::fusion {

// "" unless `states` (index = rank, every rank's from the same round) show a deadlock; then the
// text every rank's pending tensors fail with (each rank's awaited and pending tensors named).
std::string find_deadlock(const std::vector<RankState>& states);

// "rank 1 has shut down (18 collectives completed; its reason: ...)", or for a rank that failed
// "rank 1 failed and shut down (18 collectives completed): <its error>"; several joined by "; ".
std::string describe_stopped(const std::vector<StoppedRank>& stopped);

// The error of one tensor still pending on a surviving rank when others shut down: names how
// often each stopped rank completed it against this rank's `own_count` (times it completed
// here before this submission).
std::string stopped_tensor_message(int rank, const std::string& tensor, uint64_t own_count,
                                   const std::vector<StoppedRank>& stopped);

// Each rank's lag behind the median rank from each rank's mean wait in the flag allreduce (the
// last to arrive waits least): median(waits) - waits[r], at least 0.
std::vector<double> rank_lags(const std::vector<double>& waits);

// "rank 2 is the straggler: ready 310 ms after the median rank, on average over the last 20
// cycles ..." when the largest lag reaches `warning_s`, else "".
std::string describe_straggler(const std::vector<double>& lags, int cycles, double warning_s);

// "1st", "2nd", "3rd", "11th", ...
std::string ordinal(uint64_t n);

}  // namespace ringd::fusion
