#include "model/gemm.h"

#include <algorithm>
#include <climits>

#include "model/openblas_gemm.h"
#include "ringd/config.h"
#include "ringd/error.h"

#if RINGD_HAVE_CUBLAS
#include "model/cuda/cublas_gemm.h"
#endif

namespace ringd::model {
namespace {

constexpr size_t kIntMax = static_cast<size_t>(INT_MAX);

}  // namespace

const char* gemm_kind_name(GemmKind kind) {
  return kind == GemmKind::kCublas ? "cublas" : "openblas";
}

void Gemm::sgemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha,
                 const float* a, size_t lda, const float* b, size_t ldb, float beta, float* c,
                 size_t ldc) {
  // Stored row lengths: A is m x k (k x m transposed), B k x n (n x k), C m x n.
  const size_t a_row = trans_a ? m : k;
  const size_t b_row = trans_b ? k : n;
  RINGD_CHECK_ARG(
      m <= kIntMax && n <= kIntMax && k <= kIntMax,
      name() << " sgemm: " << m << " x " << n << " x " << k
             << " exceeds the BLAS interface's int sizes; use smaller layers or batches");
  RINGD_CHECK_ARG(
      lda >= std::max<size_t>(a_row, 1) && ldb >= std::max<size_t>(b_row, 1) &&
          ldc >= std::max<size_t>(n, 1) && lda <= kIntMax && ldb <= kIntMax && ldc <= kIntMax,
      name() << " sgemm (m " << m << ", n " << n << ", k " << k << "): strides lda " << lda
             << ", ldb " << ldb << ", ldc " << ldc << " must be at least the stored rows' lengths "
             << a_row << ", " << b_row << ", " << n << " (and at most INT_MAX)");
  if (m == 0 || n == 0) return;  // C is empty
  RINGD_CHECK_ARG(c != nullptr && (k == 0 || (a != nullptr && b != nullptr)),
                  name() << " sgemm: a null matrix pointer");
  multiply(trans_a, trans_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
           a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

std::string cublas_unavailable_reason() {
#if RINGD_HAVE_CUBLAS
  return cublas_device_problem();
#else
  return "this ringd was built without cuBLAS (rebuild with -DRINGD_WITH_CUDA=ON where the CUDA "
         "toolkit with cuBLAS is installed)";
#endif
}

GemmKind choose_gemm(const std::string& blas) {
  if (blas == "openblas") return GemmKind::kOpenBlas;
  if (blas == "auto") {
    return cublas_unavailable_reason().empty() ? GemmKind::kCublas : GemmKind::kOpenBlas;
  }
  RINGD_CHECK_ARG(blas == "cublas", "--blas " << blas << ": use auto, openblas or cublas");
  const std::string reason = cublas_unavailable_reason();
  if (!reason.empty()) {
    RINGD_THROW(kUnavailable, "--blas cublas: " << reason
                                                << "; use --blas openblas (or auto) to train "
                                                   "on the CPU");
  }
  return GemmKind::kCublas;
}

std::unique_ptr<Gemm> make_gemm(GemmKind kind, int cuda_device) {
  if (kind == GemmKind::kOpenBlas) return std::make_unique<OpenBlasGemm>();
#if RINGD_HAVE_CUBLAS
  return make_cublas_gemm(cuda_device);
#else
  (void)cuda_device;
  RINGD_THROW(kUnavailable, "cublas matrix products: " << cublas_unavailable_reason());
#endif
}

}  // namespace ringd::model
