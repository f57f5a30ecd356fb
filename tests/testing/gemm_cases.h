// The sgemm test cases that tests/model/gemm_test.cc (OpenBLAS against a naive loop) and
// tests/device/cublas_gemm_test.cc (cuBLAS against OpenBLAS) share: operands laid out for each
// transpose with padded strides, the check of a result against its reference, and the names of
// the four transpose combinations.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "testing/model_data.h"

namespace ringd::testing {

// C (m x n) = alpha op(A) op(B) + beta C with inner dimension k; `pad` > 0 makes every row stride
// longer than its row.
struct GemmShape {
  size_t m, n, k, pad;
};

struct GemmOperands {
  size_t lda, ldb, ldc;
  std::vector<float> a, b, c;  // random_matrix(), seeded from the shape
};

// A and B stored as op() expects them (A is k x m when transposed, B is n x k), with strides
// pad, pad + 1 and 2 pad past their rows.
inline GemmOperands gemm_operands(const GemmShape& s, bool trans_a, bool trans_b) {
  const size_t a_rows = trans_a ? s.k : s.m, a_cols = trans_a ? s.m : s.k;
  const size_t b_rows = trans_b ? s.n : s.k, b_cols = trans_b ? s.k : s.n;
  GemmOperands o{a_cols + s.pad, b_cols + s.pad + 1, s.n + 2 * s.pad, {}, {}, {}};
  o.a = random_matrix(a_rows, a_cols, o.lda, 1 + s.m);
  o.b = random_matrix(b_rows, b_cols, o.ldb, 2 + s.n);
  o.c = random_matrix(s.m, s.n, o.ldc, 3 + s.k);
  return o;
}

// "" when every element of C is within the float rounding of k products of values in [-1, 1)
// (|error| <~ k x 2^-24 x |terms|; a wrong layout is off by O(1)) and no padding was written;
// otherwise the first element that is not.
inline std::string gemm_mismatch(const std::vector<float>& got, const std::vector<float>& want,
                                 const GemmShape& s, size_t ldc, float beta) {
  const double bound = 1e-6 * static_cast<double>(s.k + 2) * (1 + std::fabs(beta));
  for (size_t i = 0; i < s.m; ++i) {
    for (size_t j = 0; j < ldc; ++j) {
      const float g = got[i * ldc + j];
      const float w = want[i * ldc + j];
      std::ostringstream os;
      if (j >= s.n && g != kMatrixPadding) {
        os << "padding of C row " << i << " column " << j << " written: " << g;
      } else if (j < s.n && !(std::fabs(double{g} - double{w}) <= bound)) {
        os << "C[" << i << "][" << j << "] = " << g << ", want " << w << " (bound " << bound << ")";
      }
      if (!os.str().empty()) return os.str();
    }
  }
  return "";
}

// "A", "AT", ... "ATBT" for the (trans_a, trans_b) parameters of a transposes test suite.
inline std::string transposes_name(const ::testing::TestParamInfo<std::tuple<bool, bool>>& info) {
  return std::string(std::get<0>(info.param) ? "AT" : "A") + (std::get<1>(info.param) ? "BT" : "B");
}

}  // namespace ringd::testing
