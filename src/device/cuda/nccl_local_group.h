// NcclLocalGroup: the LocalGroup of L GPUs in one process (public face: ringd/nccl_local_group.h).
//
//   device d:   comm d (ncclCommInitAll)   stream d (NCCL's work)   copy stream d (staging)
//
// A call validates its arguments, then issues one NCCL call per device between ncclGroupStart
// and ncclGroupEnd (one thread drives all L communicators, which only works grouped), then waits
// for every stream through a blocking-sync event (the host thread looks for up to
// NcclLocalGroupOptions::spin_us, yielding the core, then sleeps: ranks may outnumber cores) and
// checks each communicator for an asynchronous error. Calls are synchronous, like
// every LocalGroup's. After a failed NCCL call the group refuses further calls (kUnavailable):
// the other devices' halves of that call may wait on their GPUs forever.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device/cuda/cuda_piece_copier.h"
#include "ringd/nccl_local_group.h"

namespace ringd::device {

class NcclLocalGroup : public LocalGroup {
 public:
  NcclLocalGroup(std::vector<int> cuda_devices, const NcclLocalGroupOptions& options);
  ~NcclLocalGroup() override;
  NcclLocalGroup(const NcclLocalGroup&) = delete;
  NcclLocalGroup& operator=(const NcclLocalGroup&) = delete;

  int size() const override { return static_cast<int>(cuda_devices_.size()); }
  std::string kind() const override { return "nccl"; }

  void reduce_to_leader(DeviceBuffers buffers, size_t first, size_t count, DataType dtype,
                        ReduceOp op, int leader) override;
  void broadcast_from_leader(DeviceBuffers buffers, size_t first, size_t count, DataType dtype,
                             int leader) override;
  void reduce_scatter(DeviceBuffers buffers, const ShardLayout& shards, DataType dtype,
                      ReduceOp op) override;
  void allgather(DeviceBuffers buffers, const ShardLayout& shards, DataType dtype) override;

  size_t staging_piece_bytes() const override { return piece_bytes_; }
  std::unique_ptr<HostStaging> stage(DeviceBuffers buffers, std::vector<HostPiece> pieces,
                                     DataType dtype, HostAccess access) override;

  std::shared_ptr<void> allocate(int device, size_t bytes) override;
  void upload(const DeviceBuffer& destination, const void* source, size_t bytes) override;
  void download(void* destination, const DeviceBuffer& source, size_t bytes) override;

 private:
  // Runs per_device(d, comm, stream) for every device inside one NCCL group, then waits for all
  // streams. `what` names the call in errors.
  void run_grouped(const std::string& what,
                   const std::function<void(int, ncclComm_t, cudaStream_t)>& per_device);
  // Records an event on every stream and waits until each has passed it; then checks every
  // communicator for an asynchronous error.
  void wait_for_streams(const std::string& where);
  void check_device(const char* what, int device) const;
  void release_resources() noexcept;

  std::vector<int> cuda_devices_;
  size_t piece_bytes_;
  std::chrono::microseconds spin_;  // how long a wait looks at an event before sleeping
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> done_;  // per device: recorded after the group's work, waited on
  std::unique_ptr<CudaPieceCopier> copier_;
  std::string broken_;  // why the group became unusable (a failed NCCL call); empty while usable
};

}  // namespace ringd::device
