// The cuBLAS backend of the MLP's matrix products (model/cuda/cublas_gemm.h) on a real device,
// against the OpenBLAS backend within a relative tolerance (the two round differently): every
// transpose combination, non-square shapes, padded strides whose padding must stay untouched,
// beta != 0, buffers reused across growing and shrinking calls; and an MLP forward + backward
// through cuBLAS against the same MLP through OpenBLAS. Without a GPU those tests skip, saying
// why, and what runs instead is the no-device path (kUnavailable naming the reason) and the
// cuBLAS status mapping. Built only in CUDA builds (tests/CMakeLists.txt); cuBLAS builds only here.
#include <gtest/gtest.h>

#include "ringd/config.h"

#if RINGD_HAVE_CUBLAS

#include <cuda_runtime_api.h>

#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "device/cuda/reduce_kernels.h"
#include "model/cuda/cublas_errors.h"
#include "model/gemm.h"
#include "model/mlp.h"
#include "ringd/error.h"
#include "testing/gemm_cases.h"
#include "testing/model_data.h"

namespace ringd::model {
namespace {

using testing::gemm_mismatch;
using testing::gemm_operands;
using testing::GemmOperands;
using testing::GemmShape;
using testing::transposes_name;

bool have_device() { return cuda_device_count() > 0; }

// ---- no device needed -----------------------------------------------------------------------

TEST(CublasErrors, StatusesMapToCodesAndNameThemselves) {
  EXPECT_EQ(cublas_error_code(CUBLAS_STATUS_NOT_INITIALIZED), ErrorCode::kUnavailable);
  EXPECT_EQ(cublas_error_code(CUBLAS_STATUS_ALLOC_FAILED), ErrorCode::kIo);
  EXPECT_EQ(cublas_error_code(CUBLAS_STATUS_INVALID_VALUE), ErrorCode::kInvalidArgument);
  EXPECT_EQ(cublas_error_code(CUBLAS_STATUS_EXECUTION_FAILED), ErrorCode::kInternal);
  const std::string text = cublas_failure("cublasSgemm(...)", CUBLAS_STATUS_ALLOC_FAILED);
  EXPECT_NE(text.find("cublasSgemm(...) failed: CUBLAS_STATUS_ALLOC_FAILED"), std::string::npos)
      << text;
  try {
    RINGD_CUBLAS_CHECK(CUBLAS_STATUS_NOT_INITIALIZED, "product " << 3);
    FAIL() << "a failed status was not thrown";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kUnavailable);
    EXPECT_NE(std::string(error.what())
                  .find("product 3: CUBLAS_STATUS_NOT_INITIALIZED failed: "
                        "CUBLAS_STATUS_NOT_INITIALIZED"),
              std::string::npos)
        << error.what();
  }
}

TEST(CublasGemm, WithoutADeviceItIsUnavailableSayingWhy) {
  if (have_device()) GTEST_SKIP() << "a CUDA device is present";
  const std::string reason = cublas_unavailable_reason();
  EXPECT_NE(reason.find("no usable CUDA device"), std::string::npos) << reason;
  EXPECT_EQ(choose_gemm("auto"), GemmKind::kOpenBlas);
  for (int device : {-1, 0}) {  // the current device, or a chosen one (train --gpus)
    try {
      make_gemm(GemmKind::kCublas, device);
      FAIL() << "a cuBLAS backend without a device";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kUnavailable) << error.what();
      EXPECT_NE(std::string(error.what()).find(reason), std::string::npos) << error.what();
    }
  }
}

// ---- on a device ----------------------------------------------------------------------------

class CublasGemmTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {
 protected:
  void SetUp() override {
    if (!have_device()) GTEST_SKIP() << "no CUDA device: " << cuda_device_status();
  }
};

TEST_P(CublasGemmTest, MatchesOpenBlas) {
  const auto [trans_a, trans_b] = GetParam();
  const std::unique_ptr<Gemm> cublas = make_gemm(GemmKind::kCublas);
  const std::unique_ptr<Gemm> openblas = make_gemm(GemmKind::kOpenBlas);
  EXPECT_EQ(cublas->name(), std::string("cublas"));
  // Growing, shrinking and growing again: the device buffers are reused and regrown.
  for (const GemmShape& s :
       {GemmShape{3, 5, 7, 2}, GemmShape{256, 100, 784, 0}, GemmShape{1, 1, 1, 0},
        GemmShape{17, 4, 33, 5}, GemmShape{1000, 10, 256, 3}}) {
    for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{-0.5f, 2.0f}}) {
      SCOPED_TRACE(::testing::Message() << "m " << s.m << " n " << s.n << " k " << s.k << " pad "
                                        << s.pad << " beta " << beta);
      const GemmOperands o = gemm_operands(s, trans_a, trans_b);
      std::vector<float> want = o.c;
      std::vector<float> got = o.c;
      openblas->sgemm(trans_a, trans_b, s.m, s.n, s.k, alpha, o.a.data(), o.lda, o.b.data(), o.ldb,
                      beta, want.data(), o.ldc);
      cublas->sgemm(trans_a, trans_b, s.m, s.n, s.k, alpha, o.a.data(), o.lda, o.b.data(), o.ldb,
                    beta, got.data(), o.ldc);
      // Both backends are within a few float ulps of k x 2^-24 of the exact sum.
      ASSERT_EQ(gemm_mismatch(got, want, s, o.ldc, beta), "");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, CublasGemmTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()), transposes_name);

// `ringd train --gpus` makes replica d's backend on GPU d: the product is right there, the
// caller's current device stays as it was, and a GPU this process does not see is named.
TEST(CublasGemm, OnAChosenDeviceLeavesTheCallersCurrentDevice) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: " << cuda_device_status();
  const int devices = cuda_device_count();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const std::unique_ptr<Gemm> last = make_gemm(GemmKind::kCublas, devices - 1);
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0);
  const float a[] = {1, 2, 3, 4};  // 2 x 2, row-major
  const float b[] = {5, 6, 7, 8};
  float c[4] = {};
  last->sgemm(false, false, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  EXPECT_EQ(std::vector<float>(c, c + 4), (std::vector<float>{19, 22, 43, 50}));
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0) << "a product on device " << devices - 1 << " moved the caller's device";
  try {
    make_gemm(GemmKind::kCublas, devices);
    FAIL() << "a backend on CUDA device " << devices << " of " << devices;
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument) << error.what();
    EXPECT_NE(std::string(error.what()).find("CUDA device " + std::to_string(devices)),
              std::string::npos)
        << error.what();
  }
}

TEST(CublasMlp, ForwardAndBackwardMatchOpenBlas) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: " << cuda_device_status();
  const std::vector<size_t> sizes = {784, 256, 10};
  const testing::LabelledData data = testing::random_labelled_data(64, sizes[0], sizes.back(), 17);
  const Batch batch = data.batch();

  Mlp openblas(sizes, 5, make_gemm(GemmKind::kOpenBlas));
  Mlp cublas(sizes, 5, make_gemm(GemmKind::kCublas));
  EXPECT_EQ(cublas.gemm().kind(), GemmKind::kCublas);
  for (int step = 0; step < 2; ++step) {  // the second step reuses the device buffers
    const ForwardResult want = openblas.forward(batch);
    const ForwardResult got = cublas.forward(batch);
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::fabs(want.loss)) << "step " << step;
    std::vector<size_t> order;
    openblas.backward([](size_t) {});
    cublas.backward([&](size_t i) { order.push_back(i); });
    EXPECT_EQ(order, (std::vector<size_t>{3, 2, 1, 0}));
    for (size_t i = 0; i < openblas.parameters().size(); ++i) {
      const ParameterView& w = openblas.parameters()[i];
      const ParameterView& g = cublas.parameters()[i];
      double largest = 0;
      for (size_t j = 0; j < w.count; ++j)
        largest = std::max(largest, std::fabs(double{w.grad[j]}));
      ASSERT_GT(largest, 0) << w.name;
      for (size_t j = 0; j < w.count; ++j) {
        ASSERT_NEAR(g.grad[j], w.grad[j], 1e-4 * largest) << w.name << "[" << j << "]";
      }
      // The same small SGD step on both, so that step 2 starts from (nearly) equal weights.
      for (size_t j = 0; j < w.count; ++j) {
        w.value[j] -= 0.1f * w.grad[j];
        g.value[j] = w.value[j];
      }
    }
  }
}

}  // namespace
}  // namespace ringd::model

#endif  // RINGD_HAVE_CUBLAS
