// RAII: makes a CUDA device current for a scope and restores the previous one (the caller's
// choice of device is not ours to change).
#pragma once

#include <cuda_runtime_api.h>

#include "device/cuda/cuda_errors.h"

namespace ringd::device {

class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      previous_ = -1;
    }
    RINGD_CUDA_CHECK(cudaSetDevice(device), "CUDA device " << device);
  }
  ~CurrentDevice() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace ringd::device
