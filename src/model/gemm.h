// The MLP's matrix products, behind one interface with two backends:
//
//   openblas  cblas_sgemm on the CPU, one OpenBLAS thread (openblas_gemm.cc; every build)
//   cublas    cublasSgemm on the current CUDA device (cuda/cublas_gemm.cc; builds with cuBLAS;
//             compiled and linked, never run here: this machine has no GPU)
//
// Both take and return host memory: the cuBLAS backend copies A and B to the device, multiplies
// and copies C back within each call (cuda/cublas_gemm.h says why that is enough here). Both are
// deterministic run to run on the same machine, but they round differently from each other, so
// the whole job must use one of them (`ringd train` makes rank 0's choice the job's).
//
//   auto gemm = make_gemm(choose_gemm("auto"));   // cuBLAS where it can run, else OpenBLAS
//   gemm->sgemm(false, true, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);   // C = A B^T
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace ringd::model {

enum class GemmKind { kOpenBlas, kCublas };

const char* gemm_kind_name(GemmKind kind);  // "openblas", "cublas"

class Gemm {
 public:
  virtual ~Gemm() = default;

  // C = alpha op(A) op(B) + beta C, every matrix row-major in host memory: op(A) is m x k, op(B)
  // is k x n, C is m x n; op(X) = X^T when trans_x (A is then stored k x m, B n x k). lda, ldb and
  // ldc are the stored row strides in elements (at least the stored row length); elements past a
  // row's end are neither read nor written. With beta == 0, C's input is ignored (NaNs included).
  // Throws kInvalidArgument for a stride shorter than its row or a size beyond int, and the
  // backend's errors (cuBLAS: kUnavailable, kIo for device memory, kInternal) naming the call.
  void sgemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha, const float* a,
             size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc);

  virtual GemmKind kind() const = 0;
  const char* name() const { return gemm_kind_name(kind()); }

 protected:
  // Called by sgemm() with checked arguments, m, n > 0, each size and stride <= INT_MAX.
  virtual void multiply(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                        const float* a, int lda, const float* b, int ldb, float beta, float* c,
                        int ldc) = 0;
};

// Why this process cannot use cuBLAS ("" when it can): a build without cuBLAS, or no usable CUDA
// device (the runtime's words). Never throws.
std::string cublas_unavailable_reason();

// `--blas auto|openblas|cublas` -> the backend. auto: cuBLAS when cublas_unavailable_reason() is
// empty, else OpenBLAS. Throws kInvalidArgument for another name and kUnavailable (saying why and
// what to do) for cublas where it cannot run.
GemmKind choose_gemm(const std::string& blas);

// The backend of that kind; kCublas where it cannot run throws kUnavailable. cuda_device: the CUDA
// device a cuBLAS backend multiplies on (-1: the one current now); OpenBLAS ignores it.
std::unique_ptr<Gemm> make_gemm(GemmKind kind, int cuda_device = -1);

}  // namespace ringd::model
