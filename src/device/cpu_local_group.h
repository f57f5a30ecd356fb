// CpuLocalGroup: L "devices" that are L host buffers of this process.
//
// Every call is one parallel loop over the elements it touches. The range is cut into one slice
// per worker (WorkerPool; the caller is worker 0) and each worker combines its own slice across
// all L buffers, block by block, so each block of the result stays in cache while the L inputs
// stream past it once:
//
//   elements  | slice of worker 0 | slice of worker 1 | ...
//   device 0  |  b0 ............  |  b0 ............  |
//   device 1  |  b1 ............  |  b1 ............  |        per 16 KB block:
//   ...       |                   |                   |          acc = b0 op b1 op ... op b(L-1)
//   device L-1|  b(L-1) ........  |  b(L-1) ........  |          (always in device order)
//
// Reductions always combine in device order 0, 1, ..., L-1 (through a per-block accumulator, so
// the result's owner may be any device), which makes a reduction the same bits whoever owns it.
// Copies (broadcast, allgather) read each source block once and write it to the L-1 others.
// Small calls run on the calling thread alone: waking a thread costs more than they do.
#pragma once

#include <memory>

#include "device/worker_pool.h"
#include "ringd/local_group.h"

namespace ringd::device {

class CpuLocalGroup : public LocalGroup {
 public:
  CpuLocalGroup(int devices, const CpuLocalGroupOptions& options);

  int size() const override { return devices_; }
  std::string kind() const override { return "cpu"; }

  void reduce_to_leader(DeviceBuffers buffers, size_t first, size_t count, DataType dtype,
                        ReduceOp op, int leader) override;
  void broadcast_from_leader(DeviceBuffers buffers, size_t first, size_t count, DataType dtype,
                             int leader) override;
  void reduce_scatter(DeviceBuffers buffers, const ShardLayout& shards, DataType dtype,
                      ReduceOp op) override;
  void allgather(DeviceBuffers buffers, const ShardLayout& shards, DataType dtype) override;

  size_t staging_piece_bytes() const override;
  std::unique_ptr<HostStaging> stage(DeviceBuffers buffers, std::vector<HostPiece> pieces,
                                     DataType dtype, HostAccess access) override;

  std::shared_ptr<void> allocate(int device, size_t bytes) override;
  void upload(const DeviceBuffer& destination, const void* source, size_t bytes) override;
  void download(void* destination, const DeviceBuffer& source, size_t bytes) override;

  int threads() const { return pool_.size(); }

 private:
  struct Job;
  // Runs `job` over its range on as many workers as its size deserves.
  void run(const Job& job);
  void check_device(const char* what, int device) const;

  int devices_;
  WorkerPool pool_;
};

}  // namespace ringd::device
