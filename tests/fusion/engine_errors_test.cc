// What users get wrong, and what every rank must then see, without a hang: a name submitted with
// different shapes, dtypes or ops; a name submitted twice while in flight; a rank that does not
// submit what the others do (the stall inspector names it); a peer that goes away.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "fusion/engine_test_support.h"
#include "ringd/engine.h"
#include "ringd/inproc.h"
#include "testing/ranks.h"

namespace ringd {
namespace {

using testing::Transport;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct Variant {
  const char* what;
  DataType dtype;
  ReduceOp op;
  std::vector<int64_t> shape;
  const char* expect_a;  // in the message: rank 0 and 1's submission
  const char* expect_b;  // rank 2's
};

// Rank 2 submits "w" differently; every rank's handle fails naming the tensor, the ranks and both
// submissions, the tensors beside it run, and the engine stays usable. Second round: the same
// after "w" was cached (rank 2 changes it later).
TEST(EngineErrors, MismatchFailsOnEveryRankNamingRanksAndShapes) {
  const std::vector<Variant> variants = {
      {"shape", DataType::kFloat32, ReduceOp::kSum, {4, 6}, "[4, 5]", "[4, 6]"},
      {"dtype", DataType::kFloat64, ReduceOp::kSum, {4, 5}, "allreduce float sum", "double"},
      {"op", DataType::kFloat32, ReduceOp::kMax, {4, 5}, "float sum", "float max"},
  };
  for (const Variant& variant : variants) {
    for (bool cached_first : {false, true}) {
      testing::run_ranks(Transport::kInproc, 3, [&](Context& ctx) {
        Engine engine(ctx, testing::test_engine_options());
        std::vector<double> storage(64, 1.0);
        const Tensor good{storage.data(), DataType::kFloat32, {4, 5}};
        if (cached_first) engine.allreduce_async("w", good, ReduceOp::kSum).wait();
        Tensor mine = good;
        ReduceOp op = ReduceOp::kSum;
        if (ctx.rank() == 2) {
          mine = Tensor{storage.data(), variant.dtype, variant.shape};
          op = variant.op;
        }
        float ok = 1;
        Handle ok_handle = engine.allreduce_async("ok", {&ok, DataType::kFloat32, {}}, op);
        Handle w = engine.allreduce_async("w", mine, op == ReduceOp::kMax ? op : ReduceOp::kSum);
        const Error error = testing::expect_error([&] { w.wait(); });
        EXPECT_EQ(error.code(), ErrorCode::kMismatch) << variant.what;
        const std::string message = error.what();
        EXPECT_TRUE(contains(message, "'w'")) << message;
        EXPECT_TRUE(contains(message, "ranks 0, 1 submitted")) << message;
        EXPECT_TRUE(contains(message, "rank 2 submitted")) << message;
        EXPECT_TRUE(contains(message, variant.expect_a)) << message;
        EXPECT_TRUE(contains(message, variant.expect_b)) << message;
        EXPECT_TRUE(contains(message, "rank " + std::to_string(ctx.rank()) + ":")) << message;
        // "ok" ran (with rank 2's op for the op variant: max of 1s is 1, sum is 3).
        if (variant.op == ReduceOp::kMax) {
          // The ranks also disagree on "ok"'s op: it fails too.
          EXPECT_EQ(testing::expect_error([&] { ok_handle.wait(); }).code(), ErrorCode::kMismatch);
        } else {
          ok_handle.wait();
          EXPECT_EQ(ok, 3);
        }
        // Still usable, under the same name too.
        float again = 2;
        engine.allreduce_async("w", {&again, DataType::kFloat32, {}}, ReduceOp::kSum).wait();
        EXPECT_EQ(again, 6);
      });
    }
  }
}

// Each rank tries a name twice while it is certainly in flight (another rank has not submitted it
// yet): the second submission throws on that rank; the first completes everywhere.
TEST(EngineErrors, DuplicateInFlightNameThrowsOnTheSubmittingRank) {
  constexpr int kSize = 3;
  testing::Signal others_tried;
  std::atomic<int> others_left{kSize - 1};
  testing::Signal rank0_tried;
  testing::run_ranks(Transport::kInproc, kSize, [&](Context& ctx) {
    Engine engine(ctx, testing::test_engine_options());
    float x = 1;
    float y = 1;
    float x2 = 0;
    float y2 = 0;
    const auto expect_duplicate = [&](const char* name, float* data) {
      const Error error = testing::expect_error([&] {
        engine.allreduce_async(name, {data, DataType::kFloat32, {}}, ReduceOp::kSum);
      });
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      EXPECT_TRUE(contains(error.what(), "already in flight")) << error.what();
      EXPECT_TRUE(contains(error.what(), std::string("'") + name + "'")) << error.what();
    };
    Handle hx;
    Handle hy;
    if (ctx.rank() == 0) {
      hy = engine.allreduce_async("y", {&y, DataType::kFloat32, {}}, ReduceOp::kSum);
      expect_duplicate("y", &y2);
      ASSERT_TRUE(others_tried.wait());
      rank0_tried.set();
      hx = engine.allreduce_async("x", {&x, DataType::kFloat32, {}}, ReduceOp::kSum);
    } else {
      hx = engine.allreduce_async("x", {&x, DataType::kFloat32, {}}, ReduceOp::kSum);
      expect_duplicate("x", &x2);
      if (--others_left == 0) others_tried.set();
      ASSERT_TRUE(rank0_tried.wait());
      hy = engine.allreduce_async("y", {&y, DataType::kFloat32, {}}, ReduceOp::kSum);
    }
    hx.wait();
    hy.wait();
    EXPECT_EQ(x, kSize);
    EXPECT_EQ(y, kSize);
  });
}

// Rank 2 holds back "b" until rank 0's stall inspector has named it; once from the coordinator's
// table (first step), once from the response cache (second step: "b" was cached).
TEST(EngineErrors, StalledRankIsReportedByName) {
  constexpr int kSize = 3;
  std::mutex mutex;
  std::vector<StallReport> reports;
  testing::Signal reported[2];
  int step_of_report = 0;
  testing::run_ranks(Transport::kInproc, kSize, [&](Context& ctx) {
    EngineOptions options = testing::test_engine_options();
    options.stall_warning_s = 0.2;
    options.on_stall = [&](const StallReport& report) {
      std::lock_guard<std::mutex> lock(mutex);
      if (step_of_report >= 2) return;
      for (const StalledTensor& t : report.tensors) {
        if (t.name == "b" && t.missing_on == std::vector<int>{2}) {
          reports.push_back(report);
          reported[step_of_report++].set();
          return;
        }
      }
    };
    Engine engine(ctx, options);
    for (int step = 0; step < 2; ++step) {
      float a = 1;
      float b = 1;
      Handle ha = engine.allreduce_async("a", {&a, DataType::kFloat32, {}}, ReduceOp::kSum);
      if (ctx.rank() == 2) {
        ha.wait();
        ASSERT_TRUE(reported[step].wait()) << "no stall report in step " << step;
      }
      Handle hb = engine.allreduce_async("b", {&b, DataType::kFloat32, {}}, ReduceOp::kSum);
      ha.wait();
      hb.wait();
      EXPECT_EQ(a + b, 2 * kSize);
    }
  });
  ASSERT_EQ(reports.size(), 2u);
  for (const StallReport& report : reports) {
    EXPECT_FALSE(report.shutting_down);
    EXPECT_TRUE(contains(report.message, "'b'")) << report.message;
    EXPECT_TRUE(contains(report.message, "waiting on rank 2")) << report.message;
    EXPECT_TRUE(contains(report.message, "submitted by ranks 0, 1")) << report.message;
  }
}

// Past RINGD_STALL_SHUTDOWN_S the stalled tensor fails on every rank that submitted it, and every
// engine stops (rank 2 sees it when it submits).
TEST(EngineErrors, StallShutdownFailsEveryRank) {
  constexpr int kSize = 3;
  testing::Signal failed;
  std::atomic<int> failed_left{2};
  testing::run_ranks(Transport::kInproc, kSize, [&](Context& ctx) {
    EngineOptions options = testing::test_engine_options();
    options.stall_warning_s = 0;
    options.stall_shutdown_s = 0.3;
    Engine engine(ctx, options);
    float b = 1;
    if (ctx.rank() != 2) {
      Handle hb = engine.allreduce_async("b", {&b, DataType::kFloat32, {}}, ReduceOp::kSum);
      const Error error = testing::expect_error([&] { hb.wait(); });
      EXPECT_EQ(error.code(), ErrorCode::kTimeout);
      EXPECT_TRUE(contains(error.what(), "'b'")) << error.what();
      EXPECT_TRUE(contains(error.what(), "waiting on rank 2")) << error.what();
      if (--failed_left == 0) failed.set();
      return;
    }
    ASSERT_TRUE(failed.wait());
    const Error error = testing::expect_error([&] {
      engine.allreduce_async("late", {&b, DataType::kFloat32, {}}, ReduceOp::kSum).wait();
    });
    EXPECT_EQ(error.code(), ErrorCode::kTimeout);
    EXPECT_TRUE(contains(error.what(), "waiting on rank 2")) << error.what();
  });
}

// A peer whose context goes away: the pending handle fails with kPeerLost naming it, and the
// engine refuses later submissions with the same error.
TEST(EngineErrors, LostPeerFailsPendingHandles) {
  InprocHub hub(2);
  testing::RankErrors errors = testing::run_ranks_collect(
      Transport::kInproc, 2,
      [&](Context& ctx) {
        if (ctx.rank() == 1) return;  // gone: its context is destroyed now
        Engine engine(ctx, testing::test_engine_options());
        float x = 1;
        Handle h = engine.allreduce_async("x", {&x, DataType::kFloat32, {}}, ReduceOp::kSum);
        const Error error = testing::expect_error([&] { h.wait(); });
        EXPECT_EQ(error.code(), ErrorCode::kPeerLost);
        EXPECT_TRUE(contains(error.what(), "rank 1")) << error.what();
        const Error later = testing::expect_error([&] {
          engine.allreduce_async("y", {&x, DataType::kFloat32, {}}, ReduceOp::kSum);
        });
        EXPECT_EQ(later.code(), ErrorCode::kPeerLost);
      },
      std::chrono::seconds(10), &hub);
  EXPECT_EQ(errors.first(), nullptr);
}

}  // namespace
}  // namespace ringd
