// The devices of one process: a LocalGroup is the L devices (GPUs, or CPU "devices" = host
// buffers) that one ringd process drives, with the collectives that run among them. The
// hierarchical collectives (ringd/hierarchy.h) combine a LocalGroup inside the node with a Context
// across nodes.
//
// Buffers: every call takes one DeviceBuffer per device, in device order (buffers[d].device == d),
// each holding the same element layout. Element ranges are [first, first + count) in every
// buffer. Calls are synchronous: when one returns, its results are in the device buffers. The
// collectives are called by one thread at a time (like a Context); stage() and the HostStaging it
// returns may be used by one other thread meanwhile, on other elements (the hierarchical
// collectives' pipeline does that: the local steps of one chunk run while another chunk is staged
// for the network).
//
// Reductions combine the devices in a fixed order, so the result is the same bits whoever asks,
// and identical on every device after a broadcast/allgather. kAvg divides by size() once, at the
// end; callers that need another divisor (the hierarchy divides by nodes x devices) pass kSum and
// scale the result themselves (ringd/hierarchy.h does, on the host, once).
//
// Host staging (for the step across nodes, which needs host memory): stage() hands out host
// memory for a list of pieces of the device buffers, one piece at a time and in order. A group
// whose buffers are host memory (CpuLocalGroup) returns the buffers themselves and copies
// nothing; a GPU group copies through pinned memory and may prefetch piece i+1 and write back
// piece i-1 while the caller works on piece i, which is how copies overlap the network.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ringd/types.h"

namespace ringd {

struct DeviceBuffer {
  void* data = nullptr;
  int device = -1;  // index in the LocalGroup, 0..size()-1
};
using DeviceBuffers = std::span<const DeviceBuffer>;

// Shards of a range of elements, one per device: shard d is [offsets[d], offsets[d+1]).
struct ShardLayout {
  std::vector<size_t> offsets;  // size()+1 entries, non-decreasing

  // `count` elements from `first` in `parts` shards whose sizes differ by at most one (the first
  // count % parts shards get the extra element).
  static ShardLayout even(size_t first, size_t count, int parts);
  int parts() const { return static_cast<int>(offsets.size()) - 1; }
  size_t first(int shard) const { return offsets[shard]; }
  size_t count(int shard) const { return offsets[shard + 1] - offsets[shard]; }
};

// A piece of one device's buffer that the caller wants to see in host memory.
struct HostPiece {
  int device = 0;
  size_t first = 0;  // elements
  size_t count = 0;  // elements
};

enum class HostAccess {
  kRead,       // the caller only reads the piece (it is not written back)
  kWrite,      // the caller overwrites the whole piece (the device's contents are not fetched)
  kReadWrite,  // fetched, then written back
};

// Host memory for a sequence of pieces. Pieces are acquired in order 0, 1, 2, ..., and each is
// released before the piece two after it is acquired (at most two held at a time), so an
// implementation can double-buffer. finish() waits for every write-back; the destructor of an
// unfinished staging waits too but reports nothing.
class HostStaging {
 public:
  virtual ~HostStaging() = default;
  virtual void* acquire(size_t piece) = 0;
  virtual void release(size_t piece) = 0;
  virtual void finish() = 0;
};

class LocalGroup {
 public:
  virtual ~LocalGroup() = default;

  virtual int size() const = 0;
  // "cpu", "nccl": for reports and error messages.
  virtual std::string kind() const = 0;

  // buffers[leader][range] = op over every device's range (the others keep their input).
  virtual void reduce_to_leader(DeviceBuffers buffers, size_t first, size_t count, DataType dtype,
                                ReduceOp op, int leader) = 0;
  // Every device's range = buffers[leader][range].
  virtual void broadcast_from_leader(DeviceBuffers buffers, size_t first, size_t count,
                                     DataType dtype, int leader) = 0;
  // In place: for every d, shard d of buffers[d] = op over every device's shard d. Other shards
  // keep unspecified values.
  virtual void reduce_scatter(DeviceBuffers buffers, const ShardLayout& shards, DataType dtype,
                              ReduceOp op) = 0;
  // In place: for every d, shard d of buffers[d] is copied into shard d of every other buffer.
  virtual void allgather(DeviceBuffers buffers, const ShardLayout& shards, DataType dtype) = 0;

  // Preferred host piece size in bytes; SIZE_MAX when the buffers are host memory already (then
  // one piece per range costs nothing).
  virtual size_t staging_piece_bytes() const = 0;
  virtual std::unique_ptr<HostStaging> stage(DeviceBuffers buffers, std::vector<HostPiece> pieces,
                                             DataType dtype, HostAccess access) = 0;

  // Memory on device `device` (freed when the last copy of the pointer goes), and copies between
  // it and host memory: for tests, the bench and callers that own no device memory yet.
  virtual std::shared_ptr<void> allocate(int device, size_t bytes) = 0;
  virtual void upload(const DeviceBuffer& destination, const void* source, size_t bytes) = 0;
  virtual void download(void* destination, const DeviceBuffer& source, size_t bytes) = 0;

  // Throws ringd::Error(kInvalidArgument) unless `buffers` has one entry per device, in device
  // order, non-null where count > 0. `what` names the caller in the message.
  void check_buffers(const char* what, DeviceBuffers buffers, size_t count) const;
};

struct CpuLocalGroupOptions {
  // Threads that share the work of each call, the calling thread included; 0 = min(devices,
  // hardware threads). Idle threads sleep on a condition variable.
  int threads = 0;
};

// L "devices" that are L host buffers, served by a small persistent thread pool; each thread
// combines its own slice of the elements across all L buffers. Always built.
std::unique_ptr<LocalGroup> make_cpu_local_group(int devices,
                                                 const CpuLocalGroupOptions& options = {});

}  // namespace ringd
