// CUDA runtime status codes as ringd::Error (docs/errors.md), for the code in src/device/cuda/
// (NCCL's: nccl_types.h). The macro keeps the breadcrumb at the call site:
//
//   RINGD_CUDA_CHECK(cudaMemcpyAsync(...), "nccl local group device " << d << ": copy to host");
//
// Codes: no usable GPU or driver -> kUnavailable; out of memory -> kIo; a device that does not
// exist -> kInvalidArgument; anything else -> kInternal. The message is
// "<context>: <call> failed: <runtime's words>; <what to do>".
#pragma once

#include <cuda_runtime_api.h>

#include <sstream>
#include <string>

#include "ringd/error.h"

namespace ringd {

// The errors the runtime gives when this machine has no GPU, no driver, or a driver that does not
// fit: the backend is unavailable here, as opposed to a bug in how it was called.
bool cuda_means_no_device(cudaError_t error);
ErrorCode cuda_error_code(cudaError_t error);
// "<call> failed: <cudaGetErrorString>" plus what to do for the common cases. Clears the
// runtime's last error, so that it is not blamed on a later call.
std::string cuda_failure(const char* call, cudaError_t error);

}  // namespace ringd

// NOLINTBEGIN(bugprone-macro-parentheses): stream_expr is a chain of `<<` operands by design.
#define RINGD_CUDA_CHECK(call, stream_expr)                                                      \
  do {                                                                                           \
    const cudaError_t ringd_cuda_status_ = (call);                                               \
    if (ringd_cuda_status_ != cudaSuccess) {                                                     \
      std::ostringstream ringd_cuda_os_;                                                         \
      ringd_cuda_os_ << stream_expr << ": " << ::ringd::cuda_failure(#call, ringd_cuda_status_); \
      ::ringd::detail::throw_error(::ringd::cuda_error_code(ringd_cuda_status_),                 \
                                   ringd_cuda_os_.str(), __FILE__, __LINE__);                    \
    }                                                                                            \
  } while (0)
// NOLINTEND(bugprone-macro-parentheses)
