// A slow rank is named (issue 35, item 8): every rank's lag behind the median rank, from the waits
// in the negotiation's flag allreduce (src/fusion/controller.h, "Stragglers").
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "fusion/engine_test_support.h"
#include "fusion/rank_states.h"
#include "ringd/engine.h"
#include "testing/ranks.h"

namespace ringd {
namespace {

using testing::Transport;

class EngineStraggler : public ::testing::TestWithParam<Transport> {};

// Rank 2 computes 40 ms longer than the others before each step's gradient: after two windows
// of 20 cycles every rank's stats say rank 2 lags by about that, the others by almost nothing.
TEST_P(EngineStraggler, ASlowRankIsNamedByItsLag) {
  constexpr int kSize = 3;
  testing::run_ranks(GetParam(), kSize, [&](Context& ctx) {
    Engine engine(ctx, testing::test_engine_options());
    float grad = 1;
    for (int step = 0; step < 45; ++step) {
      if (ctx.rank() == 2) std::this_thread::sleep_for(std::chrono::milliseconds(40));
      engine.allreduce_async("grad", {&grad, DataType::kFloat32, {}}, ReduceOp::kSum).wait();
    }
    const std::vector<double> lags = engine.stats().rank_lag_s;
    ASSERT_EQ(lags.size(), static_cast<size_t>(kSize));
    EXPECT_GT(lags[2], 0.025) << "rank 2's lag";
    EXPECT_LT(lags[2], 0.080) << "rank 2's lag";
    EXPECT_LT(lags[0], 0.010);
    EXPECT_LT(lags[1], 0.010);
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, EngineStraggler,
                         ::testing::Values(Transport::kInproc, Transport::kTcp),
                         [](const auto& info) { return testing::transport_name(info.param); });

TEST(StragglerText, LagsAreTheMedianWaitMinusEachRanksOwn) {
  const std::vector<double> lags = fusion::rank_lags({0.30, 0.31, 0.0, 0.29});
  ASSERT_EQ(lags.size(), 4u);
  EXPECT_NEAR(lags[2], 0.295, 1e-9);
  EXPECT_EQ(lags[1], 0.0);  // ahead of the median: no lag
  EXPECT_NEAR(lags[3], 0.005, 1e-9);
}

TEST(StragglerText, TheWarningNamesTheRankAndTheLagAboveTheThreshold) {
  EXPECT_EQ(fusion::describe_straggler({0.0, 0.02, 0.01}, 20, 0.1), "");
  const std::string text = fusion::describe_straggler({0.0, 0.06, 0.31}, 20, 0.1);
  EXPECT_NE(text.find("rank 2 is the straggler: ready 310 ms after the median rank, on average "
                      "over the last 20 cycles"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("also behind: rank 1 60 ms"), std::string::npos) << text;
}

}  // namespace
}  // namespace ringd
