// The --check pattern: its closed-form expected values must equal what a real reduction of the
// ranks' inputs produces (in each dtype's own precision, through reduce_into), and count_wrong must
// catch a wrong element, a collective that never wrote, and nothing else.
#include "runners/bench_pattern.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "common/reduce.h"

namespace ringd::runners {
namespace {

using Param = std::tuple<DataType, ReduceOp, int>;

class ReducePattern : public ::testing::TestWithParam<Param> {};

// Allreduce of every rank's check input, combined in rank order, as a ring step would.
std::vector<uint8_t> reduce_inputs(const CheckShape& shape, size_t elements) {
  const size_t bytes = elements * dtype_size(shape.dtype);
  std::vector<uint8_t> result(bytes), input(bytes);
  fill_check_input(shape, 0, result.data());
  for (int rank = 1; rank < shape.ranks; ++rank) {
    fill_check_input(shape, rank, input.data());
    reduce_into(result.data(), result.data(), input.data(), elements, shape.dtype, shape.op);
  }
  if (shape.op == ReduceOp::kAvg)
    scale_in_place(result.data(), elements, shape.dtype, 1.0 / shape.ranks);
  return result;
}

TEST_P(ReducePattern, AllreduceResultIsTheClosedForm) {
  const auto [dtype, op, ranks] = GetParam();
  if (!reduce_op_supported(dtype, op)) GTEST_SKIP();
  const size_t count = 1000;
  const CheckShape shape{Collective::kAllreduce, dtype, op, ranks, 0, count};
  std::vector<uint8_t> result = reduce_inputs(shape, count);
  EXPECT_EQ(count_wrong(shape, 0, result.data()), 0);
  EXPECT_EQ(count_wrong(shape, ranks - 1, result.data()), 0);

  // One element off, and a buffer never written: both are caught.
  std::memcpy(result.data() + 7 * dtype_size(dtype), result.data() + 8 * dtype_size(dtype),
              dtype_size(dtype));
  if (check_expected_value(shape, 0, 7) != check_expected_value(shape, 0, 8)) {
    EXPECT_EQ(count_wrong(shape, 0, result.data()), 1);
  }
  fill_sentinel(result.data(), result.size());
  EXPECT_EQ(count_wrong(shape, 0, result.data()), static_cast<int64_t>(count));
}

TEST_P(ReducePattern, ReduceScatterResultIsTheClosedForm) {
  const auto [dtype, op, ranks] = GetParam();
  if (!reduce_op_supported(dtype, op)) GTEST_SKIP();
  const size_t per_rank = 37;
  const CheckShape shape{Collective::kReduceScatter, dtype, op, ranks, 0, per_rank};
  const std::vector<uint8_t> full = reduce_inputs(shape, per_rank * ranks);
  for (int rank = 0; rank < ranks; ++rank) {
    const uint8_t* slice = full.data() + rank * per_rank * dtype_size(dtype);
    EXPECT_EQ(count_wrong(shape, rank, slice), 0) << "rank " << rank;
    if (ranks > 1) {  // another rank's slice is wrong here (the pattern varies by position)
      const uint8_t* other = full.data() + ((rank + 1) % ranks) * per_rank * dtype_size(dtype);
      EXPECT_GT(count_wrong(shape, rank, other), 0) << "rank " << rank;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ReducePattern,
                         ::testing::Combine(::testing::ValuesIn(kAllDataTypes),
                                            ::testing::ValuesIn(kAllReduceOps),
                                            ::testing::Values(1, 2, 3, 8, 16, 300)),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_" +
                                  reduce_op_name(std::get<1>(info.param)) + "_" +
                                  std::to_string(std::get<2>(info.param)) + "ranks";
                         });

TEST(BenchPattern, InputsDependOnRankAndIndex) {
  const CheckShape shape{Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, 4, 0, 64};
  EXPECT_NE(check_input_value(shape, 0, 0), check_input_value(shape, 1, 0));
  EXPECT_NE(check_input_value(shape, 1, 2), check_input_value(shape, 1, 3));
}

TEST(BenchPattern, BroadcastAndAllgather) {
  for (DataType dtype : kAllDataTypes) {
    const int ranks = 5;
    const size_t count = 29;
    const size_t width = dtype_size(dtype);
    const CheckShape broadcast{Collective::kBroadcast, dtype, ReduceOp::kSum, ranks, 3, count};
    std::vector<uint8_t> buffer(count * width);
    fill_sentinel(buffer.data(), buffer.size());
    fill_check_input(broadcast, 1, buffer.data());  // not the root: leaves the buffer alone
    EXPECT_EQ(count_wrong(broadcast, 1, buffer.data()), static_cast<int64_t>(count));
    fill_check_input(broadcast, 3, buffer.data());
    EXPECT_EQ(count_wrong(broadcast, 1, buffer.data()), 0) << dtype_name(dtype);

    const CheckShape allgather{Collective::kAllgather, dtype, ReduceOp::kSum, ranks, 0, count};
    std::vector<uint8_t> gathered(ranks * count * width);
    for (int rank = 0; rank < ranks; ++rank) {
      fill_check_input(allgather, rank, gathered.data() + rank * count * width);
    }
    EXPECT_EQ(count_wrong(allgather, 2, gathered.data()), 0) << dtype_name(dtype);
    std::swap_ranges(gathered.begin(), gathered.begin() + count * width,
                     gathered.begin() + count * width);  // ranks 0 and 1 swapped
    EXPECT_GT(count_wrong(allgather, 2, gathered.data()), 0) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace ringd::runners
