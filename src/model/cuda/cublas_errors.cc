#include "model/cuda/cublas_errors.h"

namespace ringd {

ErrorCode cublas_error_code(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return ErrorCode::kUnavailable;
    case CUBLAS_STATUS_ALLOC_FAILED: return ErrorCode::kIo;
    case CUBLAS_STATUS_INVALID_VALUE: return ErrorCode::kInvalidArgument;
    default: return ErrorCode::kInternal;
  }
}

std::string cublas_failure(const char* call, cublasStatus_t status) {
  std::string message = std::string(call) + " failed: " + cublasGetStatusName(status) + " (" +
                        cublasGetStatusString(status) + ")";
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      message += "; no usable CUDA device or driver here: run on a GPU node, or --blas openblas";
      break;
    case CUBLAS_STATUS_ALLOC_FAILED:
      message += "; the GPU is full: use smaller layers or batches, or --blas openblas";
      break;
    case CUBLAS_STATUS_ARCH_MISMATCH:
      message += "; this GPU lacks a feature cuBLAS needs here: use --blas openblas";
      break;
    default: break;
  }
  return message;
}

}  // namespace ringd
