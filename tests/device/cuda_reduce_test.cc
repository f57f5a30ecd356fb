// The CUDA reduce kernels (device/cuda/reduce_kernels.h) on a real device, against the CPU's
// reduce_into() bit for bit: every dtype x op, counts 1..1M+5, aligned (vector path) and
// misaligned (element path) buffers, in place on either input, special values, closed-form
// values, and scaling. Without a GPU those tests skip, printing why, and the no-device behaviour
// itself is tested instead: count 0 without a crash, and kUnavailable from a launch.
#include <gtest/gtest.h>

#include "ringd/config.h"

#if RINGD_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
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

// ---- no device needed -----------------------------------------------------------------------

TEST(CudaDevice, CountAndStatusAgree) {
  const int count = cuda_device_count();
  ASSERT_GE(count, 0);
  const std::string status = cuda_device_status();
  if (count == 0) {
    EXPECT_NE(status, "no error") << "cuda_device_count() is 0 but the runtime reports no error";
  } else {
    EXPECT_EQ(status, "no error");
  }
}

TEST(CudaReduce, RejectsAvgOnIntegers) {
  try {
    cuda_reduce_into(nullptr, nullptr, nullptr, 4, DataType::kInt32, ReduceOp::kAvg, nullptr);
    FAIL() << "avg on int32 was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("avg"), std::string::npos) << error.what();
  }
}

TEST(CudaReduce, ZeroCountLaunchesNothing) {
  EXPECT_NO_THROW(
      cuda_reduce_into(nullptr, nullptr, nullptr, 0, DataType::kFloat32, ReduceOp::kSum, nullptr));
  EXPECT_NO_THROW(cuda_scale_in_place(nullptr, 0, DataType::kFloat16, 0.5, nullptr));
}

TEST(CudaReduce, WithoutADeviceLaunchFailsAsUnavailable) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  alignas(16) float host[4] = {1, 2, 3, 4};
  try {
    cuda_reduce_into(host, host, host, 4, DataType::kFloat32, ReduceOp::kSum, nullptr);
    FAIL() << "a kernel launch without a CUDA device reported success";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kUnavailable) << error.what();
  }
}

// ---- kernels on a device --------------------------------------------------------------------

bool have_device() { return cuda_device_count() > 0; }

// Device memory with 16 spare bytes, so a buffer can start one element past an aligned address.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) { status_ = cudaMalloc(&data_, bytes + 16); }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  cudaError_t status() const { return status_; }
  uint8_t* at(size_t byte_offset) const { return static_cast<uint8_t*>(data_) + byte_offset; }

 private:
  void* data_ = nullptr;
  cudaError_t status_ = cudaSuccess;
};

#define EXPECT_CUDA_OK(call) EXPECT_EQ((call), cudaSuccess) << #call

// Where dst points relative to the inputs.
enum class Placement { kSeparate, kInPlaceA, kInPlaceB };

class CudaReduceTest : public testing::TestWithParam<std::tuple<DataType, ReduceOp>> {
 protected:
  void SetUp() override {
    if (!have_device()) GTEST_SKIP() << "no CUDA device: " << cuda_device_status();
  }

  // Reduces a and b on the device, every buffer shifted by `element_offset` elements (misaligned
  // when non-zero), dst placed as asked; returns dst's bytes.
  std::vector<uint8_t> run_on_device(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                                     size_t element_offset, Placement placement) {
    const auto [dtype, op] = GetParam();
    const size_t bytes = a.size();
    const size_t offset = element_offset * dtype_size(dtype);
    std::vector<uint8_t> actual(bytes);
    DeviceBuffer device_a(bytes), device_b(bytes), device_dst(bytes);
    EXPECT_CUDA_OK(device_a.status());
    EXPECT_CUDA_OK(device_b.status());
    EXPECT_CUDA_OK(device_dst.status());
    EXPECT_CUDA_OK(cudaMemcpy(device_a.at(offset), a.data(), bytes, cudaMemcpyHostToDevice));
    EXPECT_CUDA_OK(cudaMemcpy(device_b.at(offset), b.data(), bytes, cudaMemcpyHostToDevice));
    uint8_t* dst = placement == Placement::kInPlaceA   ? device_a.at(offset)
                   : placement == Placement::kInPlaceB ? device_b.at(offset)
                                                       : device_dst.at(offset);
    cuda_reduce_into(dst, device_a.at(offset), device_b.at(offset), bytes / dtype_size(dtype),
                     dtype, op, nullptr);
    EXPECT_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_CUDA_OK(cudaMemcpy(actual.data(), dst, bytes, cudaMemcpyDeviceToHost));
    return actual;
  }

  void expect_matches_host(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                           size_t element_offset, Placement placement,
                           bool any_nan_matches = false) {
    const auto [dtype, op] = GetParam();
    SCOPED_TRACE(testing::Message()
                 << "count " << a.size() / dtype_size(dtype) << ", offset " << element_offset
                 << ", placement " << static_cast<int>(placement));
    std::vector<uint8_t> expected(a.size());
    reduce_into(expected.data(), a.data(), b.data(), a.size() / dtype_size(dtype), dtype, op);
    expect_same_elements(dtype, op, a, b, run_on_device(a, b, element_offset, placement), expected,
                         any_nan_matches);
  }
};

TEST_P(CudaReduceTest, MatchesHostReduceBitForBit) {
  const DataType dtype = std::get<0>(GetParam());
  for (size_t count : {size_t{1}, size_t{3}, size_t{8}, size_t{31}, size_t{1000}, size_t{4097},
                       size_t{(1 << 20) + 5}}) {
    const auto a = random_elements(dtype, count, static_cast<uint32_t>(count * 7 + 1));
    const auto b = random_elements(dtype, count, static_cast<uint32_t>(count * 7 + 2));
    expect_matches_host(a, b, 0, Placement::kSeparate);
    expect_matches_host(a, b, 1, Placement::kSeparate);  // misaligned: the element path
    if (count == 4097) {
      expect_matches_host(a, b, 0, Placement::kInPlaceA);
      expect_matches_host(a, b, 0, Placement::kInPlaceB);
      expect_matches_host(a, b, 1, Placement::kInPlaceA);
    }
  }
}

TEST_P(CudaReduceTest, SpecialValuesMatchHost) {
  const auto [dtype, op] = GetParam();
  const auto [a, b] = special_pairs(dtype);
  const bool any_nan_matches = op != ReduceOp::kMin && op != ReduceOp::kMax;
  expect_matches_host(a, b, 0, Placement::kSeparate, any_nan_matches);
  expect_matches_host(a, b, 1, Placement::kSeparate, any_nan_matches);
}

TEST_P(CudaReduceTest, SmallIntegersGiveClosedFormResults) {
  const auto [dtype, op] = GetParam();
  const auto [a, b, expected] = closed_form_case(dtype, op, 1001);
  expect_same_elements(dtype, op, a, b, run_on_device(a, b, 0, Placement::kInPlaceA), expected,
                       false);
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, CudaReduceTest, testing::ValuesIn(supported_pairs()),
                         pair_name);

TEST(CudaScale, MatchesScaleInPlaceBitForBit) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: " << cuda_device_status();
  for (DataType dtype : kAllDataTypes) {
    if (!dtype_is_float(dtype)) continue;
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<uint8_t> input = random_elements(dtype, 4097, 99);
    std::vector<uint8_t> expected = input;
    DeviceBuffer device(expected.size());
    EXPECT_CUDA_OK(device.status());
    EXPECT_CUDA_OK(
        cudaMemcpy(device.at(0), expected.data(), expected.size(), cudaMemcpyHostToDevice));
    cuda_scale_in_place(device.at(0), 4097, dtype, 1.0 / 3, nullptr);
    scale_in_place(expected.data(), 4097, dtype, 1.0 / 3);
    std::vector<uint8_t> actual(expected.size());
    EXPECT_CUDA_OK(cudaMemcpy(actual.data(), device.at(0), actual.size(), cudaMemcpyDeviceToHost));
    expect_same_elements(dtype, ReduceOp::kAvg, input, input, actual, expected, false);
  }
}

}  // namespace
}  // namespace ringd

#else  // !RINGD_HAVE_CUDA

// tests/CMakeLists.txt builds every tests/<area>/*_test.cc; without CUDA there is nothing to test,
// and this says so instead of passing silently.
TEST(CudaReduce, NotBuilt) {
  GTEST_SKIP() << "ringd was configured without CUDA (RINGD_HAVE_CUDA=0); configure with "
                  "-DRINGD_WITH_CUDA=ON on a machine with nvcc to build the CUDA kernels";
}

#endif  // RINGD_HAVE_CUDA
