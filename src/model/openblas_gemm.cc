#include "model/openblas_gemm.h"

#include <cblas.h>

#include <mutex>

namespace ringd::model {

OpenBlasGemm::OpenBlasGemm() {
  // Process-wide, set once before the first product.
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void OpenBlasGemm::multiply(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                            const float* a, int lda, const float* b, int ldb, float beta, float* c,
                            int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace ringd::model
