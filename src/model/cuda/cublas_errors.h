// cuBLAS status codes as ringd::Error (docs/errors.md), the twin of device/cuda/cuda_errors.h
// (which the CUDA runtime calls here still use). Kept beside its only user: the device layer does
// not link cuBLAS into its own code.
//
//   RINGD_CUBLAS_CHECK(cublasSgemm(...), "cublas matrix product " << m << "x" << n);
//
// Codes: CUBLAS_STATUS_NOT_INITIALIZED (no usable GPU or driver) -> kUnavailable; ALLOC_FAILED ->
// kIo; INVALID_VALUE -> kInvalidArgument; anything else -> kInternal. The message is
// "<context>: <call> failed: CUBLAS_STATUS_<NAME> (<cuBLAS's words>); <what to do>".
#pragma once

#include <cublas_api.h>

#include <sstream>
#include <string>

#include "ringd/error.h"

namespace ringd {

ErrorCode cublas_error_code(cublasStatus_t status);
std::string cublas_failure(const char* call, cublasStatus_t status);

}  // namespace ringd

// NOLINTBEGIN(bugprone-macro-parentheses): stream_expr is a chain of `<<` operands by design.
#define RINGD_CUBLAS_CHECK(call, stream_expr)                                        \
  do {                                                                               \
    const cublasStatus_t ringd_cublas_status_ = (call);                              \
    if (ringd_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                             \
      std::ostringstream ringd_cublas_os_;                                           \
      ringd_cublas_os_ << stream_expr << ": "                                        \
                       << ::ringd::cublas_failure(#call, ringd_cublas_status_);      \
      ::ringd::detail::throw_error(::ringd::cublas_error_code(ringd_cublas_status_), \
                                   ringd_cublas_os_.str(), __FILE__, __LINE__);      \
    }                                                                                \
  } while (0)
// NOLINTEND(bugprone-macro-parentheses)
