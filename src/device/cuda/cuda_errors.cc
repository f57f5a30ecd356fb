#include "device/cuda/cuda_errors.h"

namespace ringd {

bool cuda_means_no_device(cudaError_t error) {
  return error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver ||
         error == cudaErrorStubLibrary || error == cudaErrorDevicesUnavailable ||
         error == cudaErrorSystemDriverMismatch || error == cudaErrorCompatNotSupportedOnDevice;
}

ErrorCode cuda_error_code(cudaError_t error) {
  if (cuda_means_no_device(error)) return ErrorCode::kUnavailable;
  if (error == cudaErrorMemoryAllocation) return ErrorCode::kIo;
  if (error == cudaErrorInvalidDevice) return ErrorCode::kInvalidArgument;
  return ErrorCode::kInternal;
}

std::string cuda_failure(const char* call, cudaError_t error) {
  cudaGetLastError();  // a sticky error must not be blamed on the next call
  std::string message = std::string(call) + " failed: " + cudaGetErrorString(error);
  if (cuda_means_no_device(error)) {
    message += "; no usable CUDA device here: run on a GPU node, or use CPU devices";
  } else if (error == cudaErrorMemoryAllocation) {
    message += "; the GPU (or pinned host memory) is full: use smaller buffers or fewer pieces";
  } else if (error == cudaErrorInvalidDevice) {
    message += "; that CUDA device does not exist here (check CUDA_VISIBLE_DEVICES)";
  }
  return message;
}

}  // namespace ringd
