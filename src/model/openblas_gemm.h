// Matrix products on the CPU through OpenBLAS's cblas_sgemm, with one OpenBLAS thread for the
// whole process: the ranks of a job already share the cores, and a fixed thread count keeps
// every result reproducible (OpenBLAS splits a product differently for other thread counts).
#pragma once

#include "model/gemm.h"

namespace ringd::model {

class OpenBlasGemm final : public Gemm {
 public:
  OpenBlasGemm();
  GemmKind kind() const override { return GemmKind::kOpenBlas; }

 private:
  void multiply(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                int lda, const float* b, int ldb, float beta, float* c, int ldc) override;
};

}  // namespace ringd::model
