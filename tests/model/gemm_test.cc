// The MLP's matrix products (model/gemm.h): the OpenBLAS backend against a naive triple loop for
// every transpose combination, non-square shapes and strides longer than the rows (whose padding
// must stay untouched); the argument checks; the --blas choice in this build; and the MLP through
// the interface (a naive-loop backend gives the OpenBLAS MLP's loss and gradients, and the MLP
// makes exactly its 2L-1 products per step through the backend it was given). cuBLAS on a GPU:
// tests/device/cublas_gemm_test.cc.
#include "model/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "model/mlp.h"
#include "model/openblas_gemm.h"
#include "ringd/config.h"
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

// C = alpha op(A) op(B) + beta C in double, element by element (beta == 0: C's input ignored).
void naive_gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha,
                const float* a, size_t lda, const float* b, size_t ldb, float beta, float* c,
                size_t ldc) {
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      double sum = 0;
      for (size_t p = 0; p < k; ++p) {
        const double x = trans_a ? a[p * lda + i] : a[i * lda + p];
        const double y = trans_b ? b[j * ldb + p] : b[p * ldb + j];
        sum += x * y;
      }
      const double before = beta == 0.0f ? 0.0 : double{beta} * c[i * ldc + j];
      c[i * ldc + j] = static_cast<float>(double{alpha} * sum + before);
    }
  }
}

// A backend doing the naive loop, counting its calls: the MLP through the interface.
class NaiveGemm final : public Gemm {
 public:
  GemmKind kind() const override { return GemmKind::kOpenBlas; }
  int calls = 0;

 private:
  void multiply(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                int lda, const float* b, int ldb, float beta, float* c, int ldc) override {
    ++calls;
    naive_gemm(trans_a, trans_b, static_cast<size_t>(m), static_cast<size_t>(n),
               static_cast<size_t>(k), alpha, a, static_cast<size_t>(lda), b,
               static_cast<size_t>(ldb), beta, c, static_cast<size_t>(ldc));
  }
};

class GemmTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(GemmTest, OpenBlasMatchesTheNaiveLoop) {
  const auto [trans_a, trans_b] = GetParam();
  OpenBlasGemm gemm;
  // Non-square, padded (pad > 0: every stride longer than its row), and the MLP's own shapes.
  for (const GemmShape& s : {GemmShape{1, 1, 1, 0}, GemmShape{3, 5, 7, 2}, GemmShape{17, 4, 33, 5},
                             GemmShape{32, 10, 256, 0}, GemmShape{64, 3, 2, 1}}) {
    for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{-0.5f, 2.0f}}) {
      SCOPED_TRACE(::testing::Message() << "m " << s.m << " n " << s.n << " k " << s.k << " pad "
                                        << s.pad << " alpha " << alpha << " beta " << beta);
      GemmOperands o = gemm_operands(s, trans_a, trans_b);
      if (beta == 0.0f) {  // C's input must be ignored, NaNs included
        for (size_t i = 0; i < s.m; ++i) o.c[i * o.ldc] = std::numeric_limits<float>::quiet_NaN();
      }
      std::vector<float> expected = o.c;
      naive_gemm(trans_a, trans_b, s.m, s.n, s.k, alpha, o.a.data(), o.lda, o.b.data(), o.ldb, beta,
                 expected.data(), o.ldc);
      gemm.sgemm(trans_a, trans_b, s.m, s.n, s.k, alpha, o.a.data(), o.lda, o.b.data(), o.ldb, beta,
                 o.c.data(), o.ldc);
      ASSERT_EQ(gemm_mismatch(o.c, expected, s, o.ldc, beta), "");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()), transposes_name);

TEST(Gemm, RejectsShortStridesAndHugeSizes) {
  OpenBlasGemm gemm;
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 0.0f);
  try {
    // A is 4 x 3 (not transposed): lda 2 < 3.
    gemm.sgemm(false, false, 4, 2, 3, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2);
    FAIL() << "lda shorter than A's rows was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("lda 2"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("openblas"), std::string::npos) << error.what();
  }
  // Transposed, A is stored 3 x 4: lda 4 is enough; B 3 x 2 with ldb 1 is not.
  EXPECT_THROW(gemm.sgemm(true, false, 4, 2, 3, 1.0f, a.data(), 4, b.data(), 1, 0.0f, c.data(), 2),
               Error);
  EXPECT_NO_THROW(
      gemm.sgemm(true, false, 4, 2, 3, 1.0f, a.data(), 4, b.data(), 2, 0.0f, c.data(), 2));
  EXPECT_EQ(c[0], 3.0f);
  const size_t huge = size_t{1} << 31;
  EXPECT_THROW(
      gemm.sgemm(false, false, huge, 1, 1, 1.0f, a.data(), 1, b.data(), 1, 0.0f, c.data(), 1),
      Error);
  // An empty C is nothing to do: no pointer is read.
  EXPECT_NO_THROW(
      gemm.sgemm(false, false, 0, 5, 5, 1.0f, nullptr, 5, nullptr, 5, 0.0f, nullptr, 5));
}

TEST(Gemm, BlasChoiceInThisBuild) {
  EXPECT_EQ(choose_gemm("openblas"), GemmKind::kOpenBlas);
  EXPECT_EQ(make_gemm(GemmKind::kOpenBlas)->name(), std::string("openblas"));
  EXPECT_THROW(choose_gemm("mkl"), Error);
  const std::string reason = cublas_unavailable_reason();
  EXPECT_EQ(choose_gemm("auto"), reason.empty() ? GemmKind::kCublas : GemmKind::kOpenBlas);
#if !RINGD_HAVE_CUBLAS
  EXPECT_NE(reason.find("built without cuBLAS"), std::string::npos) << reason;
#endif
  if (reason.empty()) {
    EXPECT_EQ(choose_gemm("cublas"), GemmKind::kCublas);
    return;
  }
  // cublas where it cannot run: kUnavailable, saying why and what to pass instead.
  for (const auto& attempt :
       {+[] { choose_gemm("cublas"); }, +[] { make_gemm(GemmKind::kCublas); }}) {
    try {
      attempt();
      ADD_FAILURE() << "cublas was accepted although: " << reason;
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kUnavailable) << error.what();
      EXPECT_NE(std::string(error.what()).find(reason), std::string::npos) << error.what();
    }
  }
}

TEST(MlpGemm, DefaultIsOpenBlasAndANaiveBackendGivesTheSameStep) {
  const std::vector<size_t> sizes = {20, 16, 12, 5};
  const testing::LabelledData data = testing::random_labelled_data(9, 20, 5, 3);
  Mlp reference(sizes, 11);
  EXPECT_EQ(reference.gemm().kind(), GemmKind::kOpenBlas);
  auto naive_owned = std::make_unique<NaiveGemm>();
  NaiveGemm* naive = naive_owned.get();
  Mlp through_naive(sizes, 11, std::move(naive_owned));
  const ForwardResult want = reference.forward(data.batch());
  const ForwardResult got = through_naive.forward(data.batch());
  EXPECT_EQ(naive->calls, 3) << "one product per layer forward";
  EXPECT_NEAR(got.loss, want.loss, 1e-6 * std::fabs(want.loss));
  EXPECT_EQ(got.correct, want.correct);
  reference.backward([](size_t) {});
  through_naive.backward([](size_t) {});
  EXPECT_EQ(naive->calls, 3 + 5) << "dW for each layer and the delta below for all but layer 0";
  for (size_t i = 0; i < reference.parameters().size(); ++i) {
    const ParameterView& r = reference.parameters()[i];
    const ParameterView& n = through_naive.parameters()[i];
    double largest = 0;
    for (size_t j = 0; j < r.count; ++j) largest = std::max(largest, std::fabs(double{r.grad[j]}));
    for (size_t j = 0; j < r.count; ++j) {
      ASSERT_NEAR(n.grad[j], r.grad[j], 1e-5 * largest) << r.name << "[" << j << "]";
    }
  }
}

}  // namespace
}  // namespace ringd::model
