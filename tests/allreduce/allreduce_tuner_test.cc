// The allreduce tuner (allreduce_tuner.h): which calls it measures, that it runs the fixed rule's
// algorithm and then the other, judging each by its last calls, that every rank fixes the same
// algorithm from the sum over ranks of their medians (even when ranks' own timings disagree), and
// that tuned allreduces through the public entry point stay correct and identical on every rank.
#include "allreduce/allreduce_tuner.h"

#include <gtest/gtest.h>

#include <deque>
#include <mutex>

#include "ringd/collectives.h"
#include "testing/check.h"
#include "testing/ranks.h"

namespace ringd::algo {
namespace {

using testing::Transport;

Resolved tuning_on() {
  Resolved opts{};
  opts.small_allreduce_bytes = 32 << 10;
  opts.ring_allreduce_bytes = 2 << 20;
  opts.tune_allreduce = true;
  opts.timeout = std::chrono::milliseconds(10000);
  return opts;
}

TEST(AllreduceTuner, SizeClassesArePowersOfTwoRoundedUp) {
  EXPECT_EQ(AllreduceTuner::class_of(1), 0);
  EXPECT_EQ(AllreduceTuner::class_of(4096), 12);
  EXPECT_EQ(AllreduceTuner::class_of(4097), 13);
  EXPECT_EQ(AllreduceTuner::class_of(8192), 13);
  EXPECT_EQ(AllreduceTuner::class_of(size_t{3} << 20), 22);
}

TEST(AllreduceTuner, MeasuresOnlyTheRangeAroundTheThresholdOnFourOrMoreRanks) {
  AllreduceTuner tuner;
  const Resolved opts = tuning_on();  // tuned: (2 KB, 512 KB]
  EXPECT_EQ(tuner.pick(2048, 4, opts).size_class, -1);
  EXPECT_EQ(tuner.pick(2048, 4, opts).algorithm, AllreduceAlgorithm::kAuto);
  EXPECT_EQ(tuner.pick(2049, 4, opts).size_class, 12);
  EXPECT_EQ(tuner.pick(512 << 10, 4, opts).size_class, 19);
  EXPECT_EQ(tuner.pick((512 << 10) + 1, 4, opts).algorithm, AllreduceAlgorithm::kAuto);
  EXPECT_EQ(tuner.pick(16 << 10, 3, opts).algorithm, AllreduceAlgorithm::kAuto);  // p = 2
  Resolved off = opts;
  off.tune_allreduce = false;
  EXPECT_EQ(tuner.pick(16 << 10, 8, off).algorithm, AllreduceAlgorithm::kAuto);
  Resolved low_ring = opts;
  low_ring.ring_allreduce_bytes = 100 << 10;  // never tuned past the ring's threshold
  EXPECT_EQ(tuner.pick(200 << 10, 4, low_ring).algorithm, AllreduceAlgorithm::kAuto);
}

// Four ranks whose own medians disagree (ranks 0 and 1 see recursive doubling faster); the sums
// over ranks favour halving-doubling, and every rank must choose it. The first calls of each phase
// (a burst the link let through, a slow first call) are outside the window and must not count.
TEST(AllreduceTuner, EveryRankFixesTheChoiceOfTheSumOverRanks) {
  const double rd_us[4] = {100, 100, 400, 400};
  const double hd_us[4] = {150, 150, 200, 200};
  std::mutex mutex;
  std::vector<AllreduceAlgorithm> chosen(4);
  testing::run_ranks(Transport::kInproc, 4, [&](Context& ctx) {
    AllreduceTuner tuner;
    const Resolved opts = tuning_on();
    constexpr int kCalls = AllreduceTuner::kFixedCalls + AllreduceTuner::kTrialCalls;
    for (int call = 0; call < kCalls; ++call) {
      const AllreduceTuner::Pick pick = tuner.pick(16 << 10, ctx.size(), opts);
      ASSERT_EQ(pick.size_class, 14);
      // 16 KB <= the 32 KB threshold: recursive doubling first, then halving-doubling.
      EXPECT_EQ(pick.algorithm, call < AllreduceTuner::kFixedCalls
                                    ? AllreduceAlgorithm::kRecursiveDoubling
                                    : AllreduceAlgorithm::kHalvingDoubling)
          << "call " << call;
      EXPECT_EQ(tuner.chosen(14), AllreduceAlgorithm::kAuto);
      const bool rd = pick.algorithm == AllreduceAlgorithm::kRecursiveDoubling;
      const int in_phase = rd ? call : call - AllreduceTuner::kFixedCalls;
      const double early = in_phase < 10 ? (rd ? 0.1 : 50.0) : 1.0;  // would reverse the choice
      tuner.record(pick, early * 1e-6 * (rd ? rd_us[ctx.rank()] : hd_us[ctx.rank()]), ctx, opts);
    }
    const AllreduceTuner::Pick after = tuner.pick(16 << 10, ctx.size(), opts);
    EXPECT_EQ(after.size_class, -1);  // decided: no more timing
    std::lock_guard<std::mutex> lock(mutex);
    chosen[ctx.rank()] = after.algorithm;
  });
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(chosen[rank], AllreduceAlgorithm::kHalvingDoubling) << "rank " << rank;
  }
}

// Above the threshold the fixed rule's algorithm is halving-doubling, and recursive doubling is
// the trial; equal times keep the fixed rule.
TEST(AllreduceTuner, TiesKeepTheFixedRule) {
  testing::run_ranks(Transport::kInproc, 4, [&](Context& ctx) {
    AllreduceTuner tuner;
    const Resolved opts = tuning_on();
    for (int call = 0; call < AllreduceTuner::kFixedCalls + AllreduceTuner::kTrialCalls; ++call) {
      const AllreduceTuner::Pick pick = tuner.pick(100 << 10, ctx.size(), opts);
      EXPECT_EQ(pick.algorithm, call < AllreduceTuner::kFixedCalls
                                    ? AllreduceAlgorithm::kHalvingDoubling
                                    : AllreduceAlgorithm::kRecursiveDoubling);
      tuner.record(pick, 1e-3, ctx, opts);
    }
    EXPECT_EQ(tuner.chosen(17), AllreduceAlgorithm::kHalvingDoubling);
  });
}

// Through allreduce() itself, with real timings: many calls of several classes (the agreement
// allreduces interleaved with the job's own) stay exact and bitwise equal on every rank, on
// inproc and tcp ranks, including a job of 6 (folded) ranks.
TEST(AllreduceTuner, TunedAllreducesAreExactOnEveryRank) {
  for (const auto& [transport, size] :
       {std::pair{Transport::kInproc, 4}, std::pair{Transport::kInproc, 6},
        std::pair{Transport::kTcp, 4}}) {
    const std::vector<size_t> counts = {1024, 3000, 5000, 40000, 100};  // 4 KB .. 160 KB
    std::deque<testing::RankOutputs> outputs;
    constexpr int kRounds = AllreduceTuner::kFixedCalls + AllreduceTuner::kTrialCalls + 3;
    for (int k = 0; k < kRounds * static_cast<int>(counts.size()); ++k) {
      outputs.emplace_back(size);
    }
    testing::run_ranks(transport, size, [&](Context& ctx) {
      int k = 0;
      for (int round = 0; round < kRounds; ++round) {
        for (size_t count : counts) {
          std::vector<unsigned char> in =
              testing::make_input(ReduceOp::kSum, ctx.rank(), count, DataType::kFloat32);
          std::vector<unsigned char> out(in.size());
          allreduce(ctx, in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum);
          EXPECT_EQ(testing::first_mismatch(
                        out.data(), count, DataType::kFloat32, 0.0,
                        [&](size_t i) { return testing::expected_value(ReduceOp::kSum, size, i); }),
                    "")
              << "rank " << ctx.rank() << " count " << count << " round " << round;
          outputs[k++].put(ctx.rank(), out.data(), out.size());
        }
      }
      // Every tuned class (not 400 bytes) measured its 50 calls and chose.
      const auto* tuner = static_cast<const AllreduceTuner*>(ctx.collective_state().get());
      ASSERT_NE(tuner, nullptr);
      for (size_t count : counts) {
        const int size_class = AllreduceTuner::class_of(count * 4);
        EXPECT_EQ(tuner->chosen(size_class) == AllreduceAlgorithm::kAuto, count == 100)
            << "class " << size_class;
      }
    });
    for (const testing::RankOutputs& output : outputs) EXPECT_EQ(output.differences(), "");
  }
}

}  // namespace
}  // namespace ringd::algo
