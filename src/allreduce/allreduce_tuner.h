// Where recursive doubling stops paying and halving-doubling starts depends on the link: it sends
// the whole buffer log2(p) times in log2(p) steps, halving-doubling 2(p-1)/p of it in 2 log2(p)
// steps, so the crossover is near 4 x latency x bandwidth (p = 4). Measured on four emulated nodes
// (docs/performance.md): 8-16 KB at 1 Gbit/s, 128-256 KB at 10 Gbit/s. No constant is right for
// both, so allreduce(kAuto) measures instead, per size class, on the job's own links:
//
//   size class k: payloads in (2^(k-1), 2^k] bytes, for classes within
//                 (RINGD_SMALL_ALLREDUCE_BYTES / 16, x 16] (2 KB..512 KB by default; never above
//                 RINGD_RING_ALLREDUCE_BYTES) and jobs of >= 4 ranks
//   calls 1..30 of a class run the fixed rule's algorithm, calls 31..50 the other one; each
//   phase's median over its last 8 calls is its steady-state time
//   then one extra 2-double allreduce (recursive doubling) sums every rank's two medians
//   -> every rank holds the same two numbers and makes the same choice, kept for the job
//
// Runs of consecutive calls, not alternation, because what counts is the steady state: a link
// that lets a burst through faster than its rate (a token bucket, a switch buffer) makes every
// byte look free while calls alternate — the bytes recursive doubling sends in excess ride the
// credit the other algorithm leaves — and only a run long enough to use the credit up shows what
// a stream of such calls costs.
//
// Calls outside the tuned classes, and jobs that fix the threshold (RINGD_SMALL_ALLREDUCE_BYTES or
// CollectiveOptions), use the fixed rule; RINGD_TUNE_ALLREDUCE=0 turns tuning off. Tuning cannot
// change a result: the two algorithms add in the same order and give the same bits
// (halving_doubling.h). It needs what collectives need anyway — every rank calling the same
// allreduces in the same order — and costs at most 20 calls of the slower algorithm and one small
// allreduce per class used.
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "allreduce/plan.h"
#include "ringd/collectives.h"

namespace ringd::algo {

class AllreduceTuner {
 public:
  static constexpr int kFixedCalls = 30;  // the fixed rule's algorithm first
  static constexpr int kTrialCalls = 20;  // then the other one
  static constexpr int kWindow = 8;       // each phase's median is over its last calls

  // What the tuner says about one call of `bytes` (payload) on a context of `ranks`.
  struct Pick {
    AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;  // kAuto: the fixed rule applies
    int size_class = -1;  // >= 0: time this call and hand it to record()
  };
  Pick pick(size_t bytes, int ranks, const Resolved& opts);

  // The time of a call pick() asked to time. The call that completes a class's measurements runs
  // the agreement allreduce on `ctx` (every rank reaches it at the same call) and fixes the
  // class's algorithm.
  void record(const Pick& pick, double seconds, Context& ctx, const Resolved& opts);

  // The algorithm chosen for a class, kAuto while it is still measuring (for tests and logs).
  AllreduceAlgorithm chosen(int size_class) const;

  // Size class of a payload: the k with 2^(k-1) < bytes <= 2^k.
  static int class_of(size_t bytes);

 private:
  struct Class {
    int calls = 0;                     // timed so far
    std::vector<double> fixed, trial;  // seconds of each phase's calls
    AllreduceAlgorithm fixed_algorithm = AllreduceAlgorithm::kAuto;
    AllreduceAlgorithm chosen = AllreduceAlgorithm::kAuto;
  };
  std::map<int, Class> classes_;
};

}  // namespace ringd::algo
