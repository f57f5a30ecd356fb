// The CUDA kernels' per-element arithmetic (device/cuda/element_ops.cuh), run on the host through
// detail::emulate_cuda_reduce_on_host, against the CPU's reduce_into() / scale_in_place(): every
// dtype x op, random inputs (wrapping integers, subnormals), every pair of special values (+-0,
// +-Inf, NaN payloads), closed-form values. Needs no GPU, so it runs in every CUDA build; the
// kernels themselves on a device are cuda_reduce_test.cc's job.
#include <gtest/gtest.h>

#include "ringd/config.h"

#if RINGD_HAVE_CUDA

#include <cstdint>
#include <tuple>
#include <vector>

#include "common/reduce.h"
#include "device/cuda/reduce_kernels.h"
#include "device/cuda_test_values.h"
#include "ringd/error.h"
#include "ringd/types.h"

namespace ringd {
namespace {

using namespace testing_cuda;  // NOLINT(google-build-using-namespace): test helpers

class CudaElementOpsTest : public testing::TestWithParam<std::tuple<DataType, ReduceOp>> {
 protected:
  void expect_matches_host(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                           bool any_nan_matches) {
    const auto [dtype, op] = GetParam();
    const size_t count = a.size() / dtype_size(dtype);
    std::vector<uint8_t> expected(a.size()), actual(a.size());
    reduce_into(expected.data(), a.data(), b.data(), count, dtype, op);
    detail::emulate_cuda_reduce_on_host(actual.data(), a.data(), b.data(), count, dtype, op);
    expect_same_elements(dtype, op, a, b, actual, expected, any_nan_matches);
  }
};

TEST_P(CudaElementOpsTest, RandomInputsMatchReduceInto) {
  const DataType dtype = std::get<0>(GetParam());
  for (size_t count : {size_t{1}, size_t{17}, size_t{100000}}) {
    SCOPED_TRACE(testing::Message() << "count " << count);
    expect_matches_host(random_elements(dtype, count, static_cast<uint32_t>(count)),
                        random_elements(dtype, count, static_cast<uint32_t>(count + 1)), false);
  }
}

TEST_P(CudaElementOpsTest, SpecialValuesMatchReduceInto) {
  const auto [dtype, op] = GetParam();
  const auto [a, b] = special_pairs(dtype);
  // min/max are defined bit for bit for NaN and signed zeros; sum/prod up to a NaN's payload.
  expect_matches_host(a, b, op != ReduceOp::kMin && op != ReduceOp::kMax);
}

TEST_P(CudaElementOpsTest, SmallIntegersGiveClosedFormResults) {
  const auto [dtype, op] = GetParam();
  const auto [a, b, expected] = closed_form_case(dtype, op, 1001);
  std::vector<uint8_t> actual(a.size());
  detail::emulate_cuda_reduce_on_host(actual.data(), a.data(), b.data(), 1001, dtype, op);
  expect_same_elements(dtype, op, a, b, actual, expected, false);
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, CudaElementOpsTest, testing::ValuesIn(supported_pairs()),
                         pair_name);

TEST(CudaElementOps, ScaleMatchesScaleInPlace) {
  for (DataType dtype : kAllDataTypes) {
    if (!dtype_is_float(dtype)) continue;
    SCOPED_TRACE(dtype_name(dtype));
    for (double factor : {0.25, 1.0 / 3, 1.0 / 7}) {
      const std::vector<uint8_t> input = random_elements(dtype, 10007, 5);
      std::vector<uint8_t> expected = input, actual = input;
      scale_in_place(expected.data(), 10007, dtype, factor);
      detail::emulate_cuda_scale_on_host(actual.data(), 10007, dtype, factor);
      expect_same_elements(dtype, ReduceOp::kAvg, input, input, actual, expected, false);
    }
  }
}

TEST(CudaElementOps, RejectsAvgOnIntegersAndScalingIntegers) {
  uint8_t buffer[8] = {};
  EXPECT_THROW(detail::emulate_cuda_reduce_on_host(buffer, buffer, buffer, 2, DataType::kInt32,
                                                   ReduceOp::kAvg),
               Error);
  EXPECT_THROW(detail::emulate_cuda_scale_on_host(buffer, 2, DataType::kInt64, 0.5), Error);
}

}  // namespace
}  // namespace ringd

#else  // !RINGD_HAVE_CUDA

// tests/CMakeLists.txt builds every tests/<area>/*_test.cc; without CUDA there is nothing to test,
// and this says so instead of passing silently.
TEST(CudaElementOps, NotBuilt) {
  GTEST_SKIP() << "ringd was configured without CUDA (RINGD_HAVE_CUDA=0); configure with "
                  "-DRINGD_WITH_CUDA=ON on a machine with nvcc to build the CUDA kernels";
}

#endif  // RINGD_HAVE_CUDA
