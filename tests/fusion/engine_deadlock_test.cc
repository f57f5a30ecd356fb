// Deadlocks detected, not timed out; a rank that shuts down named with its reason; a child forked
// after the engine started left alone (include/ringd/engine.h "Rules", src/fusion/controller.h).
// Every wait here is bounded by the ranks' timeout or a test Signal, so a regression fails instead
// of hanging; RINGD_STALL_* are off (test_engine_options), so nothing here is a timeout.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include "fusion/engine_test_support.h"
#include "ringd/engine.h"
#include "testing/ranks.h"

namespace ringd {
namespace {

using testing::Transport;
using Seconds = std::chrono::duration<double>;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Handle submit(Engine& engine, const std::string& name, float* value) {
  return engine.allreduce_async(name, {value, DataType::kFloat32, {}}, ReduceOp::kSum);
}

class EngineDeadlock : public ::testing::TestWithParam<Transport> {};

// Rank 0 calls a then b synchronously, rank 1 b then a (rank 2, if any, a then b): both hang
// today. Every rank fails with kDeadlock within seconds (not the 30 s timeout), naming what each
// rank waits on; afterwards the engines still work.
TEST_P(EngineDeadlock, SynchronousCallsInDifferentOrdersFailEveryRank) {
  for (int size : {2, 3}) {
    testing::run_ranks(GetParam(), size, [&](Context& ctx) {
      Engine engine(ctx, testing::test_engine_options());
      const bool reversed = ctx.rank() == 1;
      float first = 1;
      const auto start = std::chrono::steady_clock::now();
      const Error error =
          testing::expect_error([&] { submit(engine, reversed ? "b" : "a", &first).wait(); });
      const Seconds took = std::chrono::steady_clock::now() - start;
      EXPECT_EQ(error.code(), ErrorCode::kDeadlock) << error.what();
      const std::string message = error.what();
      EXPECT_TRUE(contains(message, "rank " + std::to_string(ctx.rank()) + ": tensor '" +
                                        (reversed ? "b" : "a") + "'"))
          << message;
      EXPECT_TRUE(contains(message, "rank 0 waits on 'a'")) << message;
      EXPECT_TRUE(contains(message, "rank 1 waits on 'b'")) << message;
      EXPECT_TRUE(contains(message, "different orders")) << message;
      EXPECT_LT(took.count(), 10.0) << "detected only after " << took.count() << " s";
      // The engine is still usable, and the names are free again.
      float value = 2;
      submit(engine, "a", &value).wait();
      EXPECT_EQ(value, 2.0f * size);
    });
  }
}

// Uneven data: rank 1 runs 3 steps and then waits in a barrier-like collective, rank 0 runs a
// 4th step. The deadlock names the step: rank 0 waits on 'grad' (its 4th).
TEST_P(EngineDeadlock, UnevenStepsThenBarrierIsADeadlockNamingTheStep) {
  testing::run_ranks(GetParam(), 2, [&](Context& ctx) {
    Engine engine(ctx, testing::test_engine_options());
    const int steps = ctx.rank() == 0 ? 4 : 3;
    float grad = 1;
    for (int step = 0; step < 3; ++step) submit(engine, "grad", &grad).wait();
    const Error error = testing::expect_error([&] {
      if (steps == 4) submit(engine, "grad", &grad).wait();
      float token = 0;
      submit(engine, "barrier", &token).wait();
    });
    EXPECT_EQ(error.code(), ErrorCode::kDeadlock) << error.what();
    EXPECT_TRUE(contains(error.what(), "rank 0 waits on 'grad' (pending there: 'grad' (its 4th)"))
        << error.what();
    EXPECT_TRUE(contains(error.what(), "rank 1 waits on 'barrier'")) << error.what();
    EXPECT_TRUE(contains(error.what(), "uneven data")) << error.what();
  });
}

// Not a deadlock: rank 1 waits on 'y' while rank 0's second thread, which submits too, computes
// for 2.5 s before submitting 'y' (rank 0 is not blocked: one of its submitters still runs).
TEST_P(EngineDeadlock, AnotherSubmittingThreadThatStillRunsIsNotADeadlock) {
  testing::run_ranks(GetParam(), 2, [&](Context& ctx) {
    Engine engine(ctx, testing::test_engine_options());
    float x = 1;
    float y = 1;
    if (ctx.rank() == 0) {
      float warm = 1;
      std::thread other([&] {
        submit(engine, "warm-up", &warm).wait();  // makes this thread a submitter
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        submit(engine, "y", &y).wait();
      });
      submit(engine, "x", &x).wait();
      other.join();
    } else {
      float warm = 1;
      submit(engine, "warm-up", &warm).wait();
      submit(engine, "y", &y).wait();
      submit(engine, "x", &x).wait();
    }
    EXPECT_EQ(x, 2.0f);
    EXPECT_EQ(y, 2.0f);
  });
}

// Not a deadlock: a rank that computes for 2.5 s while the other waits (a slow rank).
TEST_P(EngineDeadlock, ASlowRankIsNotADeadlock) {
  testing::run_ranks(GetParam(), 2, [&](Context& ctx) {
    Engine engine(ctx, testing::test_engine_options());
    float x = 1;
    if (ctx.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    submit(engine, "x", &x).wait();
    EXPECT_EQ(x, 2.0f);
  });
}

// Rank 1 completes 'w' 3 times and shuts down with a reason; rank 0's 4th 'w' fails at once
// naming rank 1, how often it completed 'w', and its reason (not "the engine was shut down").
TEST_P(EngineDeadlock, AShutDownRankIsNamedWithItsReasonAndCount) {
  testing::run_ranks(GetParam(), 2, [&](Context& ctx) {
    Engine engine(ctx, testing::test_engine_options());
    float w = 1;
    for (int step = 0; step < 3; ++step) submit(engine, "w", &w).wait();
    if (ctx.rank() == 1) {
      engine.shutdown("it ran out of data");
      return;
    }
    const Error error = testing::expect_error([&] { submit(engine, "w", &w).wait(); });
    EXPECT_EQ(error.code(), ErrorCode::kPeerLost) << error.what();
    const std::string message = error.what();
    EXPECT_TRUE(contains(message, "rank 0: tensor 'w' (its 4th submission here)")) << message;
    EXPECT_TRUE(contains(message, "rank 1 has shut down after completing it 3 times")) << message;
    EXPECT_TRUE(contains(message, "it ran out of data")) << message;
    EXPECT_TRUE(contains(message, "Uneven data")) << message;
    // Later submissions name rank 1 and its reason too.
    const Error later = testing::expect_error([&] { submit(engine, "v", &w); });
    EXPECT_TRUE(contains(later.what(), "rank 1 has shut down (3 collectives completed"))
        << later.what();
    EXPECT_TRUE(contains(later.what(), "it ran out of data")) << later.what();
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, EngineDeadlock,
                         ::testing::Values(Transport::kInproc, Transport::kTcp),
                         [](const auto& info) { return testing::transport_name(info.param); });

// A child forked after the engine started: a submission fails at once naming the fork, and
// destroying the engine there returns (the parent's thread does not exist in the child); the
// parent's engine keeps working.
TEST(EngineFork, AChildNeverTouchesItsParentsEngine) {
  testing::run_ranks(Transport::kInproc, 2, [&](Context& ctx) {
    auto engine = std::make_unique<Engine>(ctx, testing::test_engine_options());
    float x = 1;
    submit(*engine, "x", &x).wait();
    if (ctx.rank() == 0) {
      const pid_t child = fork();
      if (child == 0) {
        int code = 0;
        try {
          float y = 1;
          submit(*engine, "y", &y);
          code = 2;  // no error
        } catch (const Error& e) {
          if (e.code() != ErrorCode::kInvalidArgument || !contains(e.what(), "forked")) code = 3;
        }
        engine.reset();  // must return: leaks the parent's engine
        _exit(code);
      }
      ASSERT_GT(child, 0);
      int status = 0;
      pid_t done = 0;
      for (int i = 0; i < 200 && done == 0; ++i) {
        done = waitpid(child, &status, WNOHANG);
        if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (done == 0) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        ADD_FAILURE() << "the forked child did not exit within 10 s";
      } else {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
      }
    }
    x = 1;
    submit(*engine, "x", &x).wait();
    EXPECT_EQ(x, 2.0f);
  });
}

}  // namespace
}  // namespace ringd
