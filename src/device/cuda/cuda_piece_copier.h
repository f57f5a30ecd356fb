// The PieceCopier (device/double_buffered_staging.h) of GPU local groups: two slots of pinned
// host memory (cudaHostAlloc, portable to every device; allocated once and reused, grown only
// when a larger piece than ever before arrives), one copy stream per device, and per device, slot
// and direction one event. A copy of a piece on device d is a cudaMemcpyAsync on d's copy stream,
// followed by recording the event (d, slot, direction):
//
//   start(kToHost, s, piece on d):   d's copy stream waits for the event of the slot's last
//                                    write-back (on whichever device), then copies into slot s
//   start(kToDevice, s, piece on d): copies from slot s on d's copy stream
//   wait(direction, s):              the host waits for the last event of (s, direction)
//
// Events are created with cudaEventBlockingSync: a waiting host thread looks at the event for up
// to `spin` (yielding the core between looks), then sleeps on it rather than spinning
// (device/cuda/event_wait.h; ranks may outnumber cores). Only in CUDA builds.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <vector>

#include "device/double_buffered_staging.h"

namespace ringd::device {

class CudaPieceCopier : public PieceCopier {
 public:
  // cuda_devices[d] is the CUDA ordinal of the group's device d; wait() looks at a copy's event
  // for up to `spin` before sleeping. Creates the streams and events; allocates no slots yet
  // (reserve_slots does).
  CudaPieceCopier(std::vector<int> cuda_devices, std::chrono::microseconds spin);
  ~CudaPieceCopier() override;
  CudaPieceCopier(const CudaPieceCopier&) = delete;
  CudaPieceCopier& operator=(const CudaPieceCopier&) = delete;

  void reserve_slots(size_t bytes) override;
  void* slot(int slot) override { return slots_[slot]; }
  void start(CopyDirection direction, int slot, DeviceBuffers buffers, const HostPiece& piece,
             DataType dtype) override;
  void wait(CopyDirection direction, int slot) override;

  size_t slot_bytes() const { return slot_bytes_; }

 private:
  cudaEvent_t& event(int device, int slot, CopyDirection direction) {
    return events_[(device * 2 + slot) * 2 + (direction == CopyDirection::kToHost ? 0 : 1)];
  }
  void release_resources() noexcept;

  std::vector<int> cuda_devices_;
  std::chrono::microseconds spin_;
  std::vector<cudaStream_t> streams_;  // one copy stream per device
  std::vector<cudaEvent_t> events_;    // [device][slot][direction]
  void* slots_[2] = {nullptr, nullptr};
  size_t slot_bytes_ = 0;
  // The device whose event marks the last copy of [slot][direction] still to be waited for; -1
  // when there is none.
  int pending_[2][2] = {{-1, -1}, {-1, -1}};
};

}  // namespace ringd::device
