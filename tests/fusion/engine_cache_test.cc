// The response cache: after the first step a tensor runs from the cache (counted), a steady-state
// step needs no request/response round with rank 0, and a capacity of 0 or a cache smaller than
// the step still gives correct results.
#include <gtest/gtest.h>

#include <barrier>

#include "fusion/engine_test_support.h"
#include "ringd/engine.h"
#include "testing/ranks.h"

namespace ringd {
namespace {

using testing::Transport;

constexpr int kSize = 3;
constexpr int kTensors = 24;
constexpr int kSteps = 3;

// Per-step stats, which must be identical on every rank.
struct StepStats {
  uint64_t hits;
  uint64_t misses;
  uint64_t rounds;
  bool operator==(const StepStats&) const = default;
};

// Stats are read between steps, when no rank has started the next one (a barrier), so every
// rank's counters cover the same cycles.
std::vector<std::vector<StepStats>> run_steps(size_t capacity) {
  std::vector<std::vector<StepStats>> per_rank(kSize);
  std::barrier between_steps(kSize);
  testing::run_ranks(Transport::kInproc, kSize, [&](Context& ctx) {
    EngineOptions options = testing::test_engine_options();
    options.cache_capacity = capacity;
    Engine engine(ctx, options);
    std::vector<testing::WorkItem> items = testing::make_workload(ctx.rank(), kTensors);
    for (int step = 0; step < kSteps; ++step) {
      testing::run_workload_step(engine, items, 77 * step + ctx.rank());
      const EngineStats stats = engine.stats();
      per_rank[ctx.rank()].push_back(
          {stats.cache_hits, stats.cache_misses, stats.coordinator_rounds});
      between_steps.arrive_and_wait();
    }
  });
  for (int rank = 1; rank < kSize; ++rank) EXPECT_EQ(per_rank[rank], per_rank[0]) << rank;
  return per_rank;
}

TEST(EngineCache, HitsAfterTheFirstStepWithoutCoordinatorRounds) {
  const std::vector<StepStats> steps = run_steps(1024)[0];
  EXPECT_EQ(steps[0].hits, 0u);
  EXPECT_EQ(steps[0].misses, static_cast<uint64_t>(kTensors));
  EXPECT_GT(steps[0].rounds, 0u);
  for (int step = 1; step < kSteps; ++step) {
    EXPECT_EQ(steps[step].hits, static_cast<uint64_t>(kTensors) * step) << step;
    EXPECT_EQ(steps[step].misses, static_cast<uint64_t>(kTensors)) << step;
    EXPECT_EQ(steps[step].rounds, steps[0].rounds) << "step " << step << " asked rank 0";
  }
}

TEST(EngineCache, WithoutCacheEveryTensorAsksTheCoordinator) {
  const std::vector<StepStats> steps = run_steps(0)[0];
  EXPECT_EQ(steps.back().hits, 0u);
  EXPECT_EQ(steps.back().misses, static_cast<uint64_t>(kTensors) * kSteps);
}

TEST(EngineCache, ACacheSmallerThanTheStepEvictsAndStaysCorrect) {
  const std::vector<StepStats> steps = run_steps(5)[0];
  EXPECT_EQ(steps.back().hits + steps.back().misses, static_cast<uint64_t>(kTensors) * kSteps);
}

// A cached name submitted with a new shape on every rank is renegotiated, not an error.
TEST(EngineCache, NewParametersOnEveryRankRenegotiate) {
  testing::run_ranks(Transport::kInproc, kSize, [&](Context& ctx) {
    Engine engine(ctx, testing::test_engine_options());
    std::vector<float> data(8, 1.0f);
    engine.allreduce_async("w", {data.data(), DataType::kFloat32, {2, 2}}, ReduceOp::kSum).wait();
    engine.allreduce_async("w", {data.data(), DataType::kFloat32, {2, 2}}, ReduceOp::kSum).wait();
    EXPECT_EQ(engine.stats().cache_hits, 1u);
    std::fill(data.begin(), data.end(), 1.0f);
    engine.allreduce_async("w", {data.data(), DataType::kFloat32, {8}}, ReduceOp::kSum).wait();
    EXPECT_EQ(data, std::vector<float>(8, kSize));
    engine.allreduce_async("w", {data.data(), DataType::kFloat32, {8}}, ReduceOp::kSum).wait();
    EXPECT_EQ(engine.stats().cache_hits, 2u);
  });
}

}  // namespace
}  // namespace ringd
