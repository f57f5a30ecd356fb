// Allreduce over ranks x counts x algorithms x in/out-of-place x transports, and every dtype x op;
// expected values from testing/values.h; all ranks must end bitwise equal.
#include <gtest/gtest.h>

#include <deque>
#include <tuple>

#include "ringd/collectives.h"
#include "testing/check.h"
#include "testing/ranks.h"

namespace ringd {
namespace {

using testing::Transport;

// Runs allreduce for each count on `size` ranks and checks values and bitwise equality.
void check_allreduce(Transport transport, int size, const std::vector<size_t>& counts,
                     DataType dtype, ReduceOp op, CollectiveOptions options, bool in_place) {
  std::deque<testing::RankOutputs> outputs;
  for (size_t c = 0; c < counts.size(); ++c) outputs.emplace_back(size);
  const double tolerance = op == ReduceOp::kAvg ? testing::avg_tolerance(dtype) : 0.0;
  testing::run_ranks(transport, size, [&](Context& ctx) {
    for (size_t c = 0; c < counts.size(); ++c) {
      const size_t count = counts[c];
      std::vector<unsigned char> in = testing::make_input(op, ctx.rank(), count, dtype);
      std::vector<unsigned char> out(in.size(), 0xAB);
      void* result = in_place ? in.data() : out.data();
      allreduce(ctx, in.data(), result, count, dtype, op, options);
      const std::string bad =
          testing::first_mismatch(result, count, dtype, tolerance,
                                  [&](size_t i) { return testing::expected_value(op, size, i); });
      EXPECT_EQ(bad, "") << "rank " << ctx.rank() << " count " << count;
      if (!in_place) {  // the input must be untouched
        EXPECT_EQ(in, testing::make_input(op, ctx.rank(), count, dtype)) << "input modified";
      }
      outputs[c].put(ctx.rank(), result, count * dtype_size(dtype));
    }
  });
  for (size_t c = 0; c < counts.size(); ++c) {
    EXPECT_EQ(outputs[c].differences(), "") << "count " << counts[c];
  }
}

// ---- shapes: ranks x counts x algorithm x in-place, float sum, small segments ----------------

using ShapeParam = std::tuple<Transport, int, AllreduceAlgorithm, bool>;
class AllreduceShapes : public ::testing::TestWithParam<ShapeParam> {};

TEST_P(AllreduceShapes, FloatSumIsExactAndIdenticalOnEveryRank) {
  const auto [transport, size, algorithm, in_place] = GetParam();
  CollectiveOptions options;
  options.algorithm = algorithm;
  options.segment_bytes = 256;  // 64 floats: most counts below are not multiples of a segment
  options.segments_in_flight = 3;
  if (algorithm == AllreduceAlgorithm::kAuto) {
    // Thresholds inside the counts below, so that auto runs all three algorithms.
    options.small_allreduce_bytes = 100;
    options.ring_allreduce_bytes = 10000;
  }
  // 0, 1, 2, primes, segment +- 1, and a few segments' worth per rank
  const std::vector<size_t> counts = {0, 1, 2, 3, 7, 13, 63, 65, 127, 1021, 4099, 65537};
  check_allreduce(transport, size, counts, DataType::kFloat32, ReduceOp::kSum, options, in_place);
}

std::string shape_name(const ::testing::TestParamInfo<ShapeParam>& info) {
  const auto [transport, size, algorithm, in_place] = info.param;
  return std::string(testing::transport_name(transport)) + "_" + std::to_string(size) + "ranks_" +
         allreduce_algorithm_name(algorithm) + (in_place ? "_inplace" : "_outofplace");
}

INSTANTIATE_TEST_SUITE_P(
    Inproc, AllreduceShapes,
    ::testing::Combine(::testing::Values(Transport::kInproc), ::testing::Range(1, 17),
                       ::testing::Values(AllreduceAlgorithm::kRing,
                                         AllreduceAlgorithm::kRecursiveDoubling,
                                         AllreduceAlgorithm::kHalvingDoubling,
                                         AllreduceAlgorithm::kAuto),
                       ::testing::Bool()),
    shape_name);

INSTANTIATE_TEST_SUITE_P(
    Tcp, AllreduceShapes,
    ::testing::Combine(::testing::Values(Transport::kTcp), ::testing::Values(2, 3, 5, 8),
                       ::testing::Values(AllreduceAlgorithm::kRing,
                                         AllreduceAlgorithm::kRecursiveDoubling,
                                         AllreduceAlgorithm::kHalvingDoubling),
                       ::testing::Bool()),
    shape_name);

// ---- every dtype x op ------------------------------------------------------------------------

using TypeParam = std::tuple<Transport, DataType, ReduceOp>;
class AllreduceTypes : public ::testing::TestWithParam<TypeParam> {};

TEST_P(AllreduceTypes, ExactForEveryRankCountAndAlgorithm) {
  const auto [transport, dtype, op] = GetParam();
  if (!reduce_op_supported(dtype, op)) GTEST_SKIP() << "avg is defined for float types only";
  const std::vector<int> sizes =
      transport == Transport::kInproc ? std::vector<int>{2, 3, 5, 8, 16} : std::vector<int>{3, 4};
  for (int size : sizes) {
    for (auto algorithm : {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRecursiveDoubling,
                           AllreduceAlgorithm::kHalvingDoubling}) {
      CollectiveOptions options;
      options.algorithm = algorithm;
      options.segment_bytes = 1000;  // not a multiple of any element size's chunk
      check_allreduce(transport, size, {1, 31, 1021, 20011}, dtype, op, options, false);
      check_allreduce(transport, size, {1021}, dtype, op, options, true);
    }
  }
}

std::string type_name(const ::testing::TestParamInfo<TypeParam>& info) {
  const auto [transport, dtype, op] = info.param;
  return std::string(testing::transport_name(transport)) + "_" + dtype_name(dtype) + "_" +
         reduce_op_name(op);
}

INSTANTIATE_TEST_SUITE_P(All, AllreduceTypes,
                         ::testing::Combine(::testing::Values(Transport::kInproc, Transport::kTcp),
                                            ::testing::ValuesIn(kAllDataTypes),
                                            ::testing::ValuesIn(kAllReduceOps)),
                         type_name);

// ---- recursive doubling and halving-doubling: the same bits --------------------------------

// Rounding shows the order of a floating-point sum: with values of mixed magnitude, two orders
// almost never agree in every element. The tuner (allreduce_tuner.h) picks between these two
// algorithms by measured speed, which must never change a result.
TEST(AllreduceOrder, RecursiveDoublingAndHalvingDoublingGiveTheSameBits) {
  const std::vector<size_t> counts = {1, 2, 3, 7, 64, 1021, 4099};
  for (int size = 2; size <= 12; ++size) {
    for (const auto& [dtype, op] : {std::pair{DataType::kFloat32, ReduceOp::kSum},
                                    std::pair{DataType::kFloat32, ReduceOp::kAvg},
                                    std::pair{DataType::kFloat64, ReduceOp::kSum},
                                    std::pair{DataType::kFloat16, ReduceOp::kSum}}) {
      std::deque<testing::RankOutputs> results;
      for (size_t k = 0; k < 2 * counts.size(); ++k) results.emplace_back(size);
      testing::run_ranks(Transport::kInproc, size, [&](Context& ctx) {
        for (size_t c = 0; c < counts.size(); ++c) {
          const size_t count = counts[c];
          std::vector<double> values(count);
          for (size_t i = 0; i < count; ++i) {  // deterministic, mixed magnitudes and signs
            const uint64_t h =
                (i * 2654435761u + static_cast<uint64_t>(ctx.rank()) * 40503u) % 1000003u;
            values[i] = (static_cast<double>(h) / 1000003.0 - 0.3) * (h % 3 == 0   ? 1000.0
                                                                      : h % 3 == 1 ? 1.0
                                                                                   : 0.001);
          }
          std::vector<unsigned char> input(count * dtype_size(dtype));
          for (size_t i = 0; i < count; ++i)
            testing::store_value(input.data(), i, dtype, values[i]);
          int k = 0;
          for (auto algorithm :
               {AllreduceAlgorithm::kRecursiveDoubling, AllreduceAlgorithm::kHalvingDoubling}) {
            CollectiveOptions options;
            options.algorithm = algorithm;
            std::vector<unsigned char> out(input.size());
            allreduce(ctx, input.data(), out.data(), count, dtype, op, options);
            results[2 * c + k++].put(ctx.rank(), out.data(), out.size());
          }
        }
      });
      for (size_t c = 0; c < counts.size(); ++c) {
        EXPECT_EQ(results[2 * c].differences(), "");
        EXPECT_EQ(results[2 * c + 1].differences(), "");
        EXPECT_EQ(results[2 * c].bytes(0), results[2 * c + 1].bytes(0))
            << size << " ranks, " << counts[c] << " x " << dtype_name(dtype) << " "
            << reduce_op_name(op) << ": recursive doubling and halving-doubling differ";
      }
    }
  }
}

// ---- large buffers ---------------------------------------------------------------------------

class AllreduceLarge : public ::testing::TestWithParam<std::tuple<Transport, int>> {};

TEST_P(AllreduceLarge, SixtyFourMegabytesWithDefaultSegments) {
  const auto [transport, size] = GetParam();
  const size_t count = (64u << 20) / 4 + 3;  // 64 MiB of floats plus an uneven tail
  check_allreduce(transport, size, {count}, DataType::kFloat32, ReduceOp::kSum, {}, false);
}

std::string large_name(const ::testing::TestParamInfo<std::tuple<Transport, int>>& info) {
  return std::string(testing::transport_name(std::get<0>(info.param))) + "_" +
         std::to_string(std::get<1>(info.param)) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(Sizes, AllreduceLarge,
                         ::testing::Values(std::tuple{Transport::kInproc, 2},
                                           std::tuple{Transport::kInproc, 16},
                                           std::tuple{Transport::kTcp, 4}),
                         large_name);

}  // namespace
}  // namespace ringd
