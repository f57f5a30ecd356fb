// The collectives over the ibverbs transport's protocol on the in-process fake fabric (see
// ibverbs_fake_fabric.h): ring and recursive-doubling allreduce, broadcast and allgather with
// counts 0, 1, primes and multi-megabyte buffers, checked against closed-form values and bitwise
// across ranks. Real RDMA hardware is not involved.
#include <gtest/gtest.h>

#include "ringd/config.h"

#if RINGD_HAVE_IBVERBS

#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <tuple>

#include "ringd/collectives.h"
#include "testing/check.h"
#include "transport/ibverbs_fake_fabric.h"

namespace ringd {
namespace {

using testing::FakeFabric;

void run_on_contexts(std::vector<std::unique_ptr<Context>>& contexts,
                     const std::function<void(Context&)>& body) {
  std::mutex mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (auto& context : contexts) {
    threads.emplace_back([&, ctx = context.get()] {
      try {
        body(*ctx);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first) first = std::current_exception();
        ctx->abort("rank " + std::to_string(ctx->rank()) + " failed");
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (first) std::rethrow_exception(first);
}

using Param = std::tuple<int, AllreduceAlgorithm>;
class IbverbsAllreduce : public ::testing::TestWithParam<Param> {};

TEST_P(IbverbsAllreduce, ExactAndBitwiseEqualOnEveryRank) {
  const int size = std::get<0>(GetParam());
  const AllreduceAlgorithm algorithm = std::get<1>(GetParam());
  auto fabric = std::make_shared<FakeFabric>();
  // 16 slots of 4 KiB: a 1 MiB segment spans many slots, and the window is smaller than it.
  auto contexts = testing::fake_ibverbs_contexts(size, fabric, {16, 4096});
  const std::vector<size_t> counts = {0, 1, 2, 31, 1021, 65537, (size_t{3} << 20) + 7};
  std::deque<testing::RankOutputs> outputs;
  for (size_t c = 0; c < counts.size(); ++c) outputs.emplace_back(size);
  CollectiveOptions options;
  options.algorithm = algorithm;
  options.segment_bytes = 256 << 10;
  run_on_contexts(contexts, [&](Context& ctx) {
    for (size_t c = 0; c < counts.size(); ++c) {
      const size_t count = counts[c];
      std::vector<unsigned char> in =
          testing::make_input(ReduceOp::kSum, ctx.rank(), count, DataType::kFloat32);
      std::vector<unsigned char> out(in.size(), 0xAB);
      allreduce(ctx, in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum, options);
      const std::string bad = testing::first_mismatch(
          out.data(), count, DataType::kFloat32, 0.0,
          [&](size_t i) { return testing::expected_value(ReduceOp::kSum, size, i); });
      EXPECT_EQ(bad, "") << "rank " << ctx.rank() << " count " << count;
      outputs[c].put(ctx.rank(), out.data(), count * 4);
    }
  });
  for (size_t c = 0; c < counts.size(); ++c) {
    EXPECT_EQ(outputs[c].differences(), "") << "count " << counts[c];
  }
  EXPECT_EQ(fabric->violations(), "");
}

INSTANTIATE_TEST_SUITE_P(
    RanksAndAlgorithms, IbverbsAllreduce,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 5),
                       ::testing::Values(AllreduceAlgorithm::kRing,
                                         AllreduceAlgorithm::kRecursiveDoubling)));

TEST(IbverbsCollectives, BroadcastAndAllgather) {
  constexpr int kSize = 4;
  auto fabric = std::make_shared<FakeFabric>();
  auto contexts = testing::fake_ibverbs_contexts(kSize, fabric, {8, 1024});
  constexpr size_t kCount = 100003;
  run_on_contexts(contexts, [&](Context& ctx) {
    std::vector<int32_t> data(kCount, 0);
    if (ctx.rank() == 2) {
      for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<int32_t>(i * 3 + 1);
    }
    broadcast(ctx, data.data(), kCount, DataType::kInt32, 2);
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(data[i], static_cast<int32_t>(i * 3 + 1)) << "rank " << ctx.rank() << " i " << i;
    }
    std::vector<int32_t> mine(kCount / 10, ctx.rank() + 1), all(kSize * (kCount / 10), -1);
    allgather(ctx, mine.data(), all.data(), mine.size(), DataType::kInt32);
    for (size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(all[i], static_cast<int32_t>(i / mine.size()) + 1) << "rank " << ctx.rank();
    }
  });
  EXPECT_EQ(fabric->violations(), "");
}

}  // namespace
}  // namespace ringd

#else  // !RINGD_HAVE_IBVERBS

TEST(IbverbsCollectives, NotBuilt) {
  GTEST_SKIP() << "built without rdma-core (RINGD_HAVE_IBVERBS=0)";
}

#endif
