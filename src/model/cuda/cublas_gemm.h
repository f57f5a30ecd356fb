// Matrix products on a GPU through cuBLAS (builds with RINGD_HAVE_CUBLAS only). Plain C++: no
// CUDA header is needed to use it. Compiled and linked against CUDA 13 but never run: the
// development machine has no GPU. tests/device/cublas_gemm_test.cc is what checks it on one.
//
// Per call, on one stream of the device that was current when the backend was made:
//
//   host A, B (and C when beta != 0) --copy in--> device buffers --cublasSgemm--> device C
//   --copy out--> host C; wait for the stream
//
// The device buffers grow to the largest call and are reused, never freed before the backend is.
// Why per call rather than keeping weights and activations on the GPU for the whole
// forward/backward: the MLP and every other user (Model::parameters(), the optimizer, the
// gradient exchange) keep their tensors in host memory, and this MLP is small (784-256-10: about
// 1 MB of operands per step), so the copies cost little next to a step's communication; a
// device-resident MLP would need device copies of every tensor and a copy of each gradient to the
// host before its ready() callback anyway. Measure before changing it.
//
// Row-major on cuBLAS's column-major: a row-major X with stride ldx is, read column-major, X^T
// with the same leading dimension. So C = op(A) op(B) is computed as
//   C^T = op(B)^T op(A)^T   =   cublasSgemm(op_b, op_a, n, m, k, B, ldb, A, lda, C, ldc)
// with the same transpose flags, and nothing is transposed in memory.
//
// Numbers: plain FP32 (CUBLAS_DEFAULT_MATH: no TF32 tensor-core rounding for sgemm) and no
// atomics, so a product is bitwise reproducible on the same GPU model and cuBLAS version (the
// library's own guarantee, one stream per handle as here), but it rounds differently from
// OpenBLAS: tests compare the two within a relative tolerance.
#pragma once

#include <memory>
#include <string>

#include "model/gemm.h"

namespace ringd::model {

// Why cuBLAS cannot run in this process ("" when a CUDA device is usable). Never throws.
std::string cublas_device_problem();

// A cuBLAS backend on CUDA device `device` (-1: the current one; the caller's current device is
// left as it was). Throws kUnavailable without a usable device, kInvalidArgument for a device
// this process does not see.
std::unique_ptr<Gemm> make_cublas_gemm(int device = -1);

}  // namespace ringd::model
