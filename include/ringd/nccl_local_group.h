// The GPUs of one process as a LocalGroup (ringd/local_group.h), through NCCL: one communicator
// per GPU from ncclCommInitAll, one stream per GPU, every call one NCCL group (ncclGroupStart /
// ncclGroupEnd around the per-GPU calls). Only in builds with CUDA and NCCL (RINGD_HAVE_NCCL).
//
//   reduce_to_leader       ncclReduce to the leader's rank
//   broadcast_from_leader  ncclBroadcast from the leader
//   reduce_scatter         ncclReduceScatter in place when the shards are equal and consecutive
//                          (ShardLayout::even of a multiple of L), else one ncclReduce per shard
//   allgather              ncclAllGather in place likewise, else one ncclBroadcast per shard
//
// Buffers are device memory: buffers[d] on the group's device d (cuda_devices[d]); allocate(),
// upload() and download() make and fill them. Every ringd dtype and op has an NCCL twin (avg is
// ncclAvg, dividing by L). Unlike the CPU group the order in which the L inputs combine is NCCL's
// (bitwise the same on every device after a broadcast or allgather, and from run to run with the
// same shapes, but not necessarily the CPU group's bits for float sums).
//
// Host staging (stage(), for the step across nodes) copies pieces of staging_piece_bytes through
// two pinned host slots that belong to the group (allocated once, reused by every call), on a
// copy stream per GPU: while the network works on piece i, piece i+1 is fetched and piece i-1
// written back (device/double_buffered_staging.h has the schedule).
#pragma once

#include "ringd/config.h"
#include "ringd/local_group.h"

#if RINGD_HAVE_NCCL

#include <cstddef>
#include <memory>
#include <vector>

namespace ringd {

struct NcclLocalGroupOptions {
  // Bytes per staged piece (whole elements are staged; at least one). Every node of a job must
  // use the same value (the hierarchical collectives check that). 1 MiB: a pipeline chunk of the
  // hierarchy (HierarchyOptions::pipeline_chunk_bytes, 4 MiB) is then four double-buffered pieces,
  // and a piece crosses PCIe in well under 0.1 ms.
  size_t staging_piece_bytes = 1 << 20;
  // How long a host thread waiting for a staged copy or a local collective looks at its CUDA
  // event (yielding the core between looks) before it sleeps on it: 0..10000 microseconds, 0 =
  // sleep at once, -1 = RINGD_SPIN_US (200). The sleep's wake-up costs tens of microseconds, more
  // than a small piece's copy takes.
  int spin_us = -1;
};

// Number of CUDA devices this process can use; 0 when there is no driver, no GPU, or the driver
// is too old for this runtime. Never throws.
int cuda_device_count();

// A group of the GPUs with these CUDA ordinals (group device d = cuda_devices[d]; each at most
// once). Throws kInvalidArgument for an empty or repeated list or a GPU that does not exist,
// kUnavailable when this process has no usable GPU, and the NCCL/CUDA failure otherwise.
std::unique_ptr<LocalGroup> make_nccl_local_group(const std::vector<int>& cuda_devices,
                                                  const NcclLocalGroupOptions& options = {});

}  // namespace ringd

#endif  // RINGD_HAVE_NCCL
