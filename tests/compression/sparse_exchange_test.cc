// The sparse exchange of (index, value) pairs over ranks x transports: it equals the dense
// allreduce of the sparsified gradients, every rank ends bitwise identical (also after many DGC
// steps of a model's parameters), and disagreement, a foreign index or a dead peer fail as a
// dense collective does.
#include "compression/sparse_exchange.h"

#include <gtest/gtest.h>

#include <mutex>
#include <random>
#include <tuple>

#include "compression/dgc_options.h"
#include "ringd/error.h"
#include "testing/rank_failures.h"
#include "testing/ranks.h"

namespace ringd::compression {
namespace {

using namespace std::chrono_literals;
using testing::Transport;

using Param = std::tuple<Transport, int>;
class SparseExchange : public ::testing::TestWithParam<Param> {};

CollectiveOptions small_segments() {
  CollectiveOptions options;
  options.segment_bytes = 256;  // 32 entries
  options.segments_in_flight = 2;
  return options;
}

TEST_P(SparseExchange, EqualsTheDenseAllreduceOfTheSparsifiedGradients) {
  const auto [transport, size] = GetParam();
  for (size_t count : {size_t{1}, size_t{97}, size_t{5000}}) {
    testing::run_ranks(transport, size, [&, count = count](Context& ctx) {
      // Each rank keeps a different, overlapping set of integer values: sums are exact.
      std::vector<float> sparsified(count, 0.0f);
      std::vector<SparseEntry> mine;
      const size_t keep = std::max<size_t>(1, count / 10);
      for (size_t e = 0; e < keep; ++e) {
        const uint32_t index = static_cast<uint32_t>((e * 7 + ctx.rank() * 3) % count);
        if (sparsified[index] != 0.0f) continue;
        sparsified[index] = static_cast<float>(ctx.rank() + 1) * ((e % 5) + 1.0f);
        mine.push_back({index, sparsified[index]});
      }
      std::sort(mine.begin(), mine.end(),
                [](const SparseEntry& a, const SparseEntry& b) { return a.index < b.index; });
      // Each rank's count may differ here: learn them with a small allgather first.
      std::vector<int64_t> counts64(ctx.size());
      const int64_t own = static_cast<int64_t>(mine.size());
      allgather(ctx, &own, counts64.data(), 1, DataType::kInt64);
      const std::vector<size_t> counts(counts64.begin(), counts64.end());
      for (bool average : {false, true}) {
        std::vector<float> sparse_result(count, -1.0f);
        sparse_allreduce(ctx, mine, counts, sparse_result.data(), count, average, small_segments());
        std::vector<float> dense_result(count);
        allreduce(ctx, sparsified.data(), dense_result.data(), count, DataType::kFloat32,
                  average ? ReduceOp::kAvg : ReduceOp::kSum);
        if (!average || (size & (size - 1)) == 0) {  // 1/size is exact for powers of two
          ASSERT_EQ(sparse_result, dense_result)
              << "rank " << ctx.rank() << " count " << count << " average " << average;
        } else {
          for (size_t i = 0; i < count; ++i) {
            ASSERT_NEAR(sparse_result[i], dense_result[i], 1e-5f * std::fabs(dense_result[i]))
                << "element " << i;
          }
        }
      }
    });
  }
}

TEST_P(SparseExchange, DgcStepsKeepEveryReplicaBitwiseIdentical) {
  // Four DGC steps of plain SGD on a 20,000-parameter "model", gradients different per rank and
  // with no exact sums: every rank's parameters must be the same bits after every step.
  const auto [transport, size] = GetParam();
  constexpr size_t kCount = 20000;
  DgcOptions dgc;
  std::mutex mutex;
  std::vector<std::vector<float>> finals(size);
  testing::run_ranks(transport, size, [&](Context& ctx) {
    std::vector<float> parameters(kCount, 0.5f);
    DgcTensorState state(kCount, dgc.momentum);
    std::mt19937 generator(17 + ctx.rank());
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int step = 0; step < 4; ++step) {
      std::vector<float> gradient(kCount);
      for (float& g : gradient) g = normal(generator);
      const double sparsity = sparsity_at(dgc, 4);  // 99.9%
      const size_t keep = kept_entries(kCount, sparsity);
      std::vector<SparseEntry> entries;
      state.compress_sparse(gradient.data(), keep, 0.0f, TopkOptions{}, 0, &entries);
      std::vector<float> average(kCount);
      sparse_allreduce(ctx, entries, std::vector<size_t>(ctx.size(), keep), average.data(), kCount,
                       true, small_segments());
      for (size_t i = 0; i < kCount; ++i) parameters[i] -= 0.1f * average[i];
    }
    std::lock_guard<std::mutex> lock(mutex);
    finals[ctx.rank()] = parameters;
  });
  for (int rank = 1; rank < size; ++rank) {
    ASSERT_EQ(finals[rank], finals[0]) << "rank " << rank << " differs from rank 0";
  }
  size_t moved = 0;
  for (float p : finals[0]) moved += p != 0.5f;
  EXPECT_GT(moved, 0u);  // something was applied
}

TEST_P(SparseExchange, RanksThatDisagreeOnTheCountsFailWithMismatch) {
  const auto [transport, size] = GetParam();
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  const auto result = testing::run_ranks_collect(
      transport, size,
      [&](Context& ctx) {
        // Rank 0 thinks it sends 3 entries and the others 2; the others think all send 2.
        std::vector<size_t> counts(ctx.size(), 2);
        if (ctx.rank() == 0) counts[0] = 3;
        std::vector<SparseEntry> mine(counts[ctx.rank()], SparseEntry{0, 1.0f});
        std::vector<float> out(8);
        sparse_allreduce(ctx, mine, counts, out.data(), out.size(), false);
      },
      5000ms);
  testing::expect_every_rank_failed(result, ErrorCode::kMismatch, "allgatherv");
}

TEST_P(SparseExchange, AForeignIndexNamesTheSendingRank) {
  const auto [transport, size] = GetParam();
  const auto result = testing::run_ranks_collect(
      transport, size,
      [&](Context& ctx) {
        const uint32_t index = ctx.rank() == size - 1 ? 100 : 1;  // beyond the 8 elements
        std::vector<float> out(8);
        sparse_allreduce(ctx, {{index, 1.0f}}, std::vector<size_t>(ctx.size(), 1), out.data(),
                         out.size(), false);
      },
      5000ms);
  testing::expect_every_rank_failed(result, ErrorCode::kProtocol,
                                    "rank " + std::to_string(size - 1) + " sent index 100");
}

TEST(SparseExchangeArguments, CountsMustMatchTheRanksAndTheEntries) {
  testing::run_ranks(Transport::kInproc, 2, [](Context& ctx) {
    std::vector<float> out(4);
    EXPECT_THROW(sparse_allreduce(ctx, {}, {0}, out.data(), 4, false), Error);
    EXPECT_THROW(sparse_allreduce(ctx, {{0, 1.0f}}, {0, 0}, out.data(), 4, false), Error);
  });
}

INSTANTIATE_TEST_SUITE_P(Inproc, SparseExchange,
                         ::testing::Combine(::testing::Values(Transport::kInproc),
                                            ::testing::Values(1, 2, 3, 4, 5, 8)),
                         [](const auto& info) {
                           return "inproc_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });
INSTANTIATE_TEST_SUITE_P(Tcp, SparseExchange,
                         ::testing::Combine(::testing::Values(Transport::kTcp),
                                            ::testing::Values(2, 4)),
                         [](const auto& info) {
                           return "tcp_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });

}  // namespace
}  // namespace ringd::compression
