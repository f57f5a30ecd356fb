// What ranks see when something goes wrong: a dead peer, a rank that never joins, ranks that
// disagree on sizes, invalid arguments. Every surviving rank must fail (never report success with a
// wrong result) and must do so within a bounded time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "ringd/collectives.h"
#include "ringd/error.h"
#include "testing/ranks.h"

namespace ringd {
namespace {

using namespace std::chrono_literals;
using testing::Transport;

struct Outcome {
  ErrorCode code;
  std::string message;
};

Outcome outcome_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
}

class Failures : public ::testing::TestWithParam<Transport> {};

TEST_P(Failures, DeadPeerFailsEveryOtherRankAndNamesIt) {
  constexpr int kSize = 4, kVictim = 2;
  const auto timeout = 2000ms;
  const auto start = std::chrono::steady_clock::now();
  auto result = testing::run_ranks_collect(
      GetParam(), kSize,
      [&](Context& ctx) {
        std::vector<float> buf(4 << 20, 1.0f);
        if (ctx.rank() == kVictim) {
          allreduce(ctx, buf.data(), buf.data(), 1, DataType::kFloat32, ReduceOp::kSum);
          return;  // "dies": its context is destroyed while the others are mid-collective
        }
        allreduce(ctx, buf.data(), buf.data(), 1, DataType::kFloat32, ReduceOp::kSum);
        for (int i = 0; i < 50; ++i) {
          allreduce(ctx, buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
        }
      },
      timeout);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, 2 * timeout + 1s) << "failure took longer than twice the timeout";
  EXPECT_EQ(result.errors[kVictim], nullptr);
  for (int rank : {1, 3}) {  // the victim's ring neighbours see it go
    ASSERT_NE(result.errors[rank], nullptr) << "rank " << rank << " reported success";
    const Outcome o = outcome_of(result.errors[rank]);
    EXPECT_EQ(o.code, ErrorCode::kPeerLost) << o.message;
    EXPECT_NE(o.message.find("rank 2"), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("allreduce"), std::string::npos) << o.message;
  }
  ASSERT_NE(result.errors[0], nullptr) << "rank 0 reported success";
  const ErrorCode code0 = outcome_of(result.errors[0]).code;
  EXPECT_TRUE(code0 == ErrorCode::kPeerLost || code0 == ErrorCode::kTimeout);
}

TEST_P(Failures, RankThatNeverJoinsTimesOutTheOthers) {
  constexpr int kSize = 3;
  std::mutex mutex;
  std::condition_variable cv;
  int finished = 0;
  const auto timeout = 300ms;
  auto result = testing::run_ranks_collect(
      GetParam(), kSize,
      [&](Context& ctx) {
        if (ctx.rank() == 1) {  // alive (context open) but never calls the collective
          std::unique_lock<std::mutex> lock(mutex);
          cv.wait_for(lock, 10s, [&] { return finished == kSize - 1; });
          return;
        }
        std::vector<float> buf(1000, 1.0f);
        try {
          allreduce(ctx, buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
        } catch (...) {
          {
            std::lock_guard<std::mutex> lock(mutex);
            ++finished;
          }
          cv.notify_all();
          throw;
        }
      },
      timeout);
  for (int rank : {0, 2}) {
    ASSERT_NE(result.errors[rank], nullptr);
    const Outcome o = outcome_of(result.errors[rank]);
    EXPECT_TRUE(o.code == ErrorCode::kTimeout || o.code == ErrorCode::kPeerLost) << o.message;
  }
  // Rank 0's left neighbour in a ring of 3 is rank 2 and its partner in recursive doubling is 1:
  // whichever it waited on, the message names a peer rank and the operation.
  const Outcome o0 = outcome_of(result.errors[0]);
  EXPECT_NE(o0.message.find("peer rank"), std::string::npos) << o0.message;
}

TEST_P(Failures, MismatchedCountsFailInsteadOfReturningGarbage) {
  constexpr int kSize = 3;
  auto result = testing::run_ranks_collect(
      GetParam(), kSize,
      [&](Context& ctx) {
        const size_t count = ctx.rank() == 0 ? 100000 : 200000;
        std::vector<float> buf(count, 1.0f);
        CollectiveOptions options;
        options.algorithm = AllreduceAlgorithm::kRing;
        allreduce(ctx, buf.data(), buf.data(), count, DataType::kFloat32, ReduceOp::kSum, options);
      },
      1000ms);
  int mismatches = 0;
  for (int rank = 0; rank < kSize; ++rank) {
    ASSERT_NE(result.errors[rank], nullptr) << "rank " << rank << " reported success";
    const Outcome o = outcome_of(result.errors[rank]);
    if (o.code == ErrorCode::kMismatch) {
      ++mismatches;
      EXPECT_NE(o.message.find("bytes"), std::string::npos) << o.message;
    }
  }
  EXPECT_GE(mismatches, 1);
}

TEST_P(Failures, InvalidArgumentsAreRejectedBeforeAnyMessage) {
  auto result = testing::run_ranks_collect(GetParam(), 2, [&](Context& ctx) {
    std::vector<int32_t> ints(10, 1);
    EXPECT_THROW(allreduce(ctx, ints.data(), ints.data(), 10, DataType::kInt32, ReduceOp::kAvg),
                 Error);
    EXPECT_THROW(broadcast(ctx, ints.data(), 10, DataType::kInt32, 2), Error);
    EXPECT_THROW(allreduce(ctx, nullptr, ints.data(), 10, DataType::kInt32, ReduceOp::kSum), Error);
    // The context is still usable afterwards.
    allreduce(ctx, ints.data(), ints.data(), 10, DataType::kInt32, ReduceOp::kSum);
    EXPECT_EQ(ints[9], 2);
  });
  EXPECT_EQ(result.first(), nullptr);
}

INSTANTIATE_TEST_SUITE_P(All, Failures, ::testing::Values(Transport::kInproc, Transport::kTcp),
                         [](const auto& info) { return testing::transport_name(info.param); });

}  // namespace
}  // namespace ringd
