// The fusion engine's results: every rank submits the same named tensors in its own random order
// and gets correct results, bitwise identical across ranks, with fusion on or off, compressed or
// not, grouped, broadcast and allgathered.
#include "ringd/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <tuple>

#include "fusion/engine_test_support.h"
#include "testing/ranks.h"

namespace ringd {
namespace {

using testing::Transport;

using Param = std::tuple<Transport, int, size_t>;  // transport, ranks, fusion threshold
class EngineOrders : public ::testing::TestWithParam<Param> {};

TEST_P(EngineOrders, RandomSubmissionOrdersGiveCorrectIdenticalResults) {
  const auto [transport, size, threshold] = GetParam();
  constexpr int kSteps = 3;
  testing::RankOutputs outputs(size);
  testing::run_ranks(transport, size, [&](Context& ctx) {
    EngineOptions options = testing::test_engine_options();
    options.fusion_threshold_bytes = threshold;
    Engine engine(ctx, options);
    std::vector<testing::WorkItem> items = testing::make_workload(ctx.rank(), 40);
    std::vector<unsigned char> last;
    for (int step = 0; step < kSteps; ++step) {
      last = testing::run_workload_step(engine, items, 1000 * step + ctx.rank());
    }
    outputs.put(ctx.rank(), last.data(), last.size());
    const EngineStats stats = engine.stats();
    EXPECT_EQ(stats.tensors_done, 40u * kSteps);
    if (threshold == 0) {
      EXPECT_EQ(stats.fused_tensors, 0u);
    }
  });
  EXPECT_EQ(outputs.differences(), "");
}

INSTANTIATE_TEST_SUITE_P(
    Inproc, EngineOrders,
    ::testing::Combine(::testing::Values(Transport::kInproc), ::testing::Values(1, 2, 3, 5),
                       ::testing::Values(size_t{0}, size_t{8} << 10, size_t{64} << 20)));
INSTANTIATE_TEST_SUITE_P(Tcp, EngineOrders,
                         ::testing::Combine(::testing::Values(Transport::kTcp),
                                            ::testing::Values(3),
                                            ::testing::Values(size_t{64} << 20)));

// The same workload, fused and one tensor at a time, gives the same bytes.
TEST(Engine, FusionOnAndOffGiveTheSameBytes) {
  constexpr int kSize = 4;
  std::vector<std::vector<unsigned char>> results;
  for (size_t threshold : {size_t{0}, size_t{1} << 20}) {
    testing::RankOutputs outputs(kSize);
    std::vector<unsigned char> rank0;
    testing::run_ranks(Transport::kInproc, kSize, [&](Context& ctx) {
      EngineOptions options = testing::test_engine_options();
      options.fusion_threshold_bytes = threshold;
      Engine engine(ctx, options);
      std::vector<testing::WorkItem> items = testing::make_workload(ctx.rank(), 30);
      std::vector<unsigned char> bytes = testing::run_workload_step(engine, items, ctx.rank());
      outputs.put(ctx.rank(), bytes.data(), bytes.size());
      if (ctx.rank() == 0) rank0 = bytes;
    });
    EXPECT_EQ(outputs.differences(), "");
    results.push_back(rank0);
  }
  EXPECT_EQ(results[0], results[1]);
}

// A group runs in one cycle: its tensors fill buckets up to the threshold (4000-byte tensors:
// two per 8 KiB bucket), or one bucket each without fusion.
TEST(Engine, FusionBucketsFollowTheThreshold) {
  for (size_t threshold : {size_t{0}, size_t{8} << 10, size_t{64} << 20}) {
    testing::run_ranks(Transport::kInproc, 3, [&](Context& ctx) {
      EngineOptions options = testing::test_engine_options();
      options.fusion_threshold_bytes = threshold;
      Engine engine(ctx, options);
      std::vector<testing::WorkItem> items = testing::float_items(ctx.rank(), 6, 1000);
      testing::run_group_step(engine, items, "layer");
      const EngineStats stats = engine.stats();
      const uint64_t buckets = threshold == 0 ? 6 : threshold == (8 << 10) ? 3 : 1;
      EXPECT_EQ(stats.buckets, buckets) << threshold;
      EXPECT_EQ(stats.fused_tensors, threshold == 0 ? 0u : 6u) << threshold;
    });
  }
}

// float32 allreduces travel as fp16 / bf16: small integers stay exact, fused or alone.
TEST(Engine, CompressedAllreducesAreExactForSmallIntegers) {
  for (Compression wire : {Compression::kFp16, Compression::kBf16}) {
    testing::run_ranks(Transport::kInproc, 3, [&](Context& ctx) {
      EngineOptions options = testing::test_engine_options();
      options.compression = wire;
      Engine engine(ctx, options);
      std::vector<testing::WorkItem> items;
      for (size_t count : {size_t{1}, size_t{300}, size_t{70000}}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
          testing::WorkItem item{
              "w" + std::to_string(count) + reduce_op_name(op), DataType::kFloat32, op, count, {}};
          items.push_back(std::move(item));
        }
      }
      testing::run_group_step(engine, items, "compressed");
      EXPECT_EQ(engine.stats().fused_tensors, items.size()) << compression_name(wire);
      testing::WorkItem alone{"alone", DataType::kFloat32, ReduceOp::kSum, 5000, {}};
      std::vector<testing::WorkItem> one{alone};
      testing::run_workload_step(engine, one, 0);
    });
  }
}

TEST(Engine, CallbacksGroupsBroadcastsAndUnevenAllgathers) {
  constexpr int kSize = 3;
  testing::run_ranks(Transport::kInproc, kSize, [&](Context& ctx) {
    Engine engine(ctx, testing::test_engine_options());
    const int rank = ctx.rank();
    // A group of three allreduces, with callbacks.
    std::atomic<int> called{0};
    std::vector<std::vector<float>> grads(3, std::vector<float>(100, static_cast<float>(rank)));
    std::vector<Submission> group;
    for (int i = 0; i < 3; ++i) {
      Submission s;
      s.name = "group.g" + std::to_string(i);
      s.tensor = Tensor{grads[i].data(), DataType::kFloat32, {10, 10}};
      s.op = ReduceOp::kSum;
      s.callback = [&](std::exception_ptr error) {
        EXPECT_EQ(error, nullptr);
        ++called;
      };
      group.push_back(std::move(s));
    }
    // Submitted in rank-dependent order relative to the broadcasts below.
    std::vector<Handle> group_handles;
    if (rank == 1) group_handles = engine.submit_group("step", group);
    // Two broadcasts from rank 1 (fused as bytes) and an allgather with rank+1 rows each.
    std::vector<int32_t> ints(7, rank == 1 ? 42 : -1);
    std::vector<double> doubles(5, rank == 1 ? 2.5 : -1);
    Handle b1 = engine.broadcast_async("bcast.ints", {ints.data(), DataType::kInt32, {7}}, 1);
    Handle b2 =
        engine.broadcast_async("bcast.doubles", {doubles.data(), DataType::kFloat64, {5}}, 1);
    std::vector<int32_t> rows(static_cast<size_t>(rank + 1) * 2, rank);
    Handle gathered = engine.allgather_async(
        "gather", {rows.data(), DataType::kInt32, {static_cast<int64_t>(rank + 1), 2}});
    if (rank != 1) group_handles = engine.submit_group("step", group);

    for (Handle& h : group_handles) h.wait();
    EXPECT_EQ(called.load(), 3);
    for (const auto& grad : grads) EXPECT_EQ(grad[0], 0 + 1 + 2);
    b1.wait();
    b2.wait();
    EXPECT_EQ(ints, std::vector<int32_t>(7, 42));
    EXPECT_EQ(doubles, std::vector<double>(5, 2.5));
    gathered.wait();
    EXPECT_EQ(gathered.output_shape(), (std::vector<int64_t>{1 + 2 + 3, 2}));
  });
}

TEST(Engine, AllgatherConcatenatesRowsOfEveryRank) {
  constexpr int kSize = 3;
  testing::run_ranks(Transport::kInproc, kSize, [&](Context& ctx) {
    Engine engine(ctx, testing::test_engine_options());
    const int rank = ctx.rank();
    for (bool even : {true, false}) {
      const int my_rows = even ? 2 : rank + 1;
      std::vector<int32_t> mine(static_cast<size_t>(my_rows) * 3);
      for (size_t i = 0; i < mine.size(); ++i) mine[i] = rank * 1000 + static_cast<int32_t>(i);
      Handle h = engine.allgather_async(even ? "even" : "uneven",
                                        {mine.data(), DataType::kInt32, {my_rows, 3}});
      h.wait();
      std::vector<int32_t> expected;
      for (int r = 0; r < kSize; ++r) {
        const int rows = even ? 2 : r + 1;
        for (int i = 0; i < rows * 3; ++i) expected.push_back(r * 1000 + i);
      }
      std::vector<int32_t> got(expected.size());
      ASSERT_EQ(h.output().size(), got.size() * sizeof(int32_t));
      std::memcpy(got.data(), h.output().data(), h.output().size());
      EXPECT_EQ(got, expected);
      EXPECT_EQ(h.output_shape(),
                (std::vector<int64_t>{static_cast<int64_t>(expected.size() / 3), 3}));
    }
  });
}

TEST(Engine, SubmittingAfterShutdownThrows) {
  testing::run_ranks(Transport::kInproc, 2, [&](Context& ctx) {
    Engine engine(ctx, testing::test_engine_options());
    float x = 1;
    engine.allreduce_async("x", {&x, DataType::kFloat32, {}}, ReduceOp::kSum).wait();
    EXPECT_EQ(x, 2);
    engine.shutdown();
    const Error error = testing::expect_error([&] {
      engine.allreduce_async("y", {&x, DataType::kFloat32, {}}, ReduceOp::kSum);
    });
    EXPECT_EQ(error.code(), ErrorCode::kPeerLost);
    EXPECT_NE(std::string(error.what()).find("stopped"), std::string::npos) << error.what();
  });
}

}  // namespace
}  // namespace ringd
