#include "device/cuda/cuda_piece_copier.h"

#include "device/cuda/cuda_errors.h"
#include "device/cuda/current_device.h"
#include "device/cuda/event_wait.h"
#include "ringd/error.h"

namespace ringd::device {
namespace {

constexpr size_t kSlotGranule = 64 << 10;  // slots grow in whole 64 KiB

int direction_index(CopyDirection direction) { return direction == CopyDirection::kToHost ? 0 : 1; }

}  // namespace

CudaPieceCopier::CudaPieceCopier(std::vector<int> cuda_devices, std::chrono::microseconds spin)
    : cuda_devices_(std::move(cuda_devices)), spin_(spin) {
  const size_t devices = cuda_devices_.size();
  streams_.assign(devices, nullptr);
  events_.assign(devices * 4, nullptr);
  try {
    for (size_t d = 0; d < devices; ++d) {
      CurrentDevice current(cuda_devices_[d]);
      RINGD_CUDA_CHECK(cudaStreamCreateWithFlags(&streams_[d], cudaStreamNonBlocking),
                       "host staging, CUDA device " << cuda_devices_[d] << ": copy stream");
      for (int k = 0; k < 4; ++k) {
        RINGD_CUDA_CHECK(cudaEventCreateWithFlags(&events_[d * 4 + k],
                                                  cudaEventDisableTiming | cudaEventBlockingSync),
                         "host staging, CUDA device " << cuda_devices_[d] << ": copy events");
      }
    }
  } catch (...) {
    release_resources();
    throw;
  }
}

CudaPieceCopier::~CudaPieceCopier() { release_resources(); }

void CudaPieceCopier::release_resources() noexcept {
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  for (size_t d = 0; d < streams_.size(); ++d) {
    if (cudaSetDevice(cuda_devices_[d]) != cudaSuccess) continue;
    if (streams_[d] != nullptr) {
      cudaStreamSynchronize(streams_[d]);
      cudaStreamDestroy(streams_[d]);
      streams_[d] = nullptr;
    }
    for (int k = 0; k < 4; ++k) {
      if (events_[d * 4 + k] != nullptr) cudaEventDestroy(events_[d * 4 + k]);
      events_[d * 4 + k] = nullptr;
    }
  }
  for (void*& slot : slots_) {
    if (slot != nullptr) cudaFreeHost(slot);
    slot = nullptr;
  }
  if (previous >= 0) cudaSetDevice(previous);
  cudaGetLastError();
}

void CudaPieceCopier::reserve_slots(size_t bytes) {
  if (bytes <= slot_bytes_) return;
  for (auto& pending : pending_) {
    if (pending[0] != -1 || pending[1] != -1) {
      RINGD_THROW(kInternal, "host staging: slots resized while a copy is pending");
    }
  }
  const size_t rounded = (bytes + kSlotGranule - 1) / kSlotGranule * kSlotGranule;
  for (void*& slot : slots_) {
    if (slot != nullptr) {
      RINGD_CUDA_CHECK(cudaFreeHost(slot),
                       "host staging: freeing a " << slot_bytes_ << "-byte pinned slot");
      slot = nullptr;
    }
  }
  slot_bytes_ = 0;
  for (void*& slot : slots_) {
    RINGD_CUDA_CHECK(cudaHostAlloc(&slot, rounded, cudaHostAllocPortable),
                     "host staging: two pinned slots of " << rounded << " bytes");
  }
  slot_bytes_ = rounded;
}

void CudaPieceCopier::start(CopyDirection direction, int slot, DeviceBuffers buffers,
                            const HostPiece& piece, DataType dtype) {
  const size_t bytes = piece.count * dtype_size(dtype);
  RINGD_CHECK_ARG(bytes <= slot_bytes_,
                  "host staging: a piece of " << bytes << " bytes for slots of " << slot_bytes_);
  const int device = piece.device;
  const int cuda_device = cuda_devices_[device];
  CurrentDevice current(cuda_device);
  cudaStream_t stream = streams_[device];
  char* device_bytes = static_cast<char*>(buffers[device].data) + piece.first * dtype_size(dtype);
  if (direction == CopyDirection::kToHost) {
    const int writer = pending_[slot][1];
    if (writer != -1) {  // the slot's last write-back must have left it
      RINGD_CUDA_CHECK(cudaStreamWaitEvent(stream, event(writer, slot, CopyDirection::kToDevice)),
                       "host staging, CUDA device " << cuda_device << ": ordering slot " << slot);
    }
    RINGD_CUDA_CHECK(
        cudaMemcpyAsync(slots_[slot], device_bytes, bytes, cudaMemcpyDeviceToHost, stream),
        "host staging, CUDA device " << cuda_device << ": copying " << bytes << " bytes to host");
  } else {
    RINGD_CUDA_CHECK(
        cudaMemcpyAsync(device_bytes, slots_[slot], bytes, cudaMemcpyHostToDevice, stream),
        "host staging, CUDA device " << cuda_device << ": copying " << bytes
                                     << " bytes to the device");
  }
  RINGD_CUDA_CHECK(cudaEventRecord(event(device, slot, direction), stream),
                   "host staging, CUDA device " << cuda_device << ": recording a copy event");
  pending_[slot][direction_index(direction)] = device;
}

void CudaPieceCopier::wait(CopyDirection direction, int slot) {
  int& pending = pending_[slot][direction_index(direction)];
  if (pending == -1) return;
  const int device = pending;
  pending = -1;
  RINGD_CUDA_CHECK(wait_for_event(event(device, slot, direction), spin_),
                   "host staging, CUDA device "
                       << cuda_devices_[device] << ": waiting for a copy "
                       << (direction == CopyDirection::kToHost ? "to host" : "to the device"));
}

}  // namespace ringd::device
