#include "device/cpu_local_group.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/reduce.h"
#include "ringd/error.h"

namespace ringd::device {
namespace {

constexpr size_t kBlockBytes = 16 << 10;      // result block kept in cache while inputs stream
constexpr size_t kMinSliceBytes = 128 << 10;  // below this per worker, fewer workers are faster

// Elements [first, first + count) whose result belongs to device `owner`.
struct Run {
  int owner;
  size_t first;
  size_t count;
};

int default_threads(int devices) {
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, std::min(devices, hardware));
}

}  // namespace

struct CpuLocalGroup::Job {
  enum class Kind { kReduce, kCopy };
  Kind kind;
  DeviceBuffers buffers;
  DataType dtype;
  ReduceOp op;
  std::vector<Run> runs;  // contiguous, in element order

  char* at(int device, size_t element) const {
    return static_cast<char*>(buffers[device].data) + element * dtype_size(dtype);
  }

  // One block of a run: every device's elements combined in device order into the owner's.
  void reduce_block(int owner, size_t first, size_t count, void* accumulator) const {
    const int devices = static_cast<int>(buffers.size());
    char* result = at(owner, first);
    if (devices == 2) {
      reduce_into(result, at(0, first), at(1, first), count, dtype, op);
    } else {
      reduce_into(accumulator, at(0, first), at(1, first), count, dtype, op);
      for (int d = 2; d < devices - 1; ++d) {
        reduce_into(accumulator, accumulator, at(d, first), count, dtype, op);
      }
      reduce_into(result, accumulator, at(devices - 1, first), count, dtype, op);
    }
    if (op == ReduceOp::kAvg) scale_in_place(result, count, dtype, 1.0 / devices);
  }

  // One block of a run: the owner's elements copied to every other device.
  void copy_block(int owner, size_t first, size_t count) const {
    const size_t bytes = count * dtype_size(dtype);
    for (int d = 0; d < static_cast<int>(buffers.size()); ++d) {
      if (d != owner) std::memcpy(at(d, first), at(owner, first), bytes);
    }
  }

  // Everything of this job inside elements [begin, end).
  void run_slice(size_t begin, size_t end) const {
    alignas(64) unsigned char accumulator[kBlockBytes];
    const size_t block = kBlockBytes / dtype_size(dtype);
    for (const Run& run : runs) {
      const size_t lo = std::max(begin, run.first), hi = std::min(end, run.first + run.count);
      for (size_t first = lo; first < hi; first += block) {
        const size_t count = std::min(block, hi - first);
        if (kind == Kind::kReduce) {
          reduce_block(run.owner, first, count, accumulator);
        } else {
          copy_block(run.owner, first, count);
        }
      }
    }
  }
};

CpuLocalGroup::CpuLocalGroup(int devices, const CpuLocalGroupOptions& options)
    : devices_(devices),
      pool_(options.threads > 0 ? options.threads : default_threads(std::max(devices, 1))) {
  RINGD_CHECK_ARG(devices >= 1, "a cpu local group needs at least one device, got " << devices);
}

void CpuLocalGroup::run(const Job& job) {
  if (devices_ == 1 || job.runs.empty()) return;  // one device: every result is its input
  const size_t begin = job.runs.front().first;
  const size_t end = job.runs.back().first + job.runs.back().count;
  const size_t elem = dtype_size(job.dtype);
  const size_t bytes = (end - begin) * elem;
  const int tasks = static_cast<int>(
      std::clamp<size_t>(bytes / kMinSliceBytes, 1, static_cast<size_t>(pool_.size())));
  // Slice boundaries on 64-byte multiples of the element index, so slices do not share lines.
  const size_t align = 64 / elem;
  auto boundary = [&](int task) {
    if (task == tasks) return end;
    const size_t raw = begin + (end - begin) * static_cast<size_t>(task) / tasks;
    return std::min(end, std::max(begin, raw / align * align));
  };
  pool_.run(tasks, [&](int task) { job.run_slice(boundary(task), boundary(task + 1)); });
}

void CpuLocalGroup::check_device(const char* what, int device) const {
  RINGD_CHECK_ARG(device >= 0 && device < devices_, what << ": device " << device
                                                         << " is not in this local group of "
                                                         << devices_ << " cpu devices");
}

void CpuLocalGroup::reduce_to_leader(DeviceBuffers buffers, size_t first, size_t count,
                                     DataType dtype, ReduceOp op, int leader) {
  check_buffers("reduce_to_leader", buffers, count);
  check_device("reduce_to_leader", leader);
  RINGD_CHECK_ARG(reduce_op_supported(dtype, op), "reduce_to_leader: op " << reduce_op_name(op)
                                                                          << " is not defined for "
                                                                          << dtype_name(dtype));
  if (count == 0) return;
  run(Job{Job::Kind::kReduce, buffers, dtype, op, {{leader, first, count}}});
}

void CpuLocalGroup::broadcast_from_leader(DeviceBuffers buffers, size_t first, size_t count,
                                          DataType dtype, int leader) {
  check_buffers("broadcast_from_leader", buffers, count);
  check_device("broadcast_from_leader", leader);
  if (count == 0) return;
  run(Job{Job::Kind::kCopy, buffers, dtype, ReduceOp::kSum, {{leader, first, count}}});
}

namespace {
std::vector<Run> shard_runs(const ShardLayout& shards) {
  std::vector<Run> runs;
  for (int d = 0; d < shards.parts(); ++d) {
    if (shards.count(d) > 0) runs.push_back({d, shards.first(d), shards.count(d)});
  }
  return runs;
}
}  // namespace

void CpuLocalGroup::reduce_scatter(DeviceBuffers buffers, const ShardLayout& shards, DataType dtype,
                                   ReduceOp op) {
  RINGD_CHECK_ARG(shards.parts() == devices_,
                  "reduce_scatter: " << shards.parts() << " shards for " << devices_ << " devices");
  check_buffers("reduce_scatter", buffers, shards.offsets.back() - shards.offsets.front());
  RINGD_CHECK_ARG(reduce_op_supported(dtype, op), "reduce_scatter: op " << reduce_op_name(op)
                                                                        << " is not defined for "
                                                                        << dtype_name(dtype));
  run(Job{Job::Kind::kReduce, buffers, dtype, op, shard_runs(shards)});
}

void CpuLocalGroup::allgather(DeviceBuffers buffers, const ShardLayout& shards, DataType dtype) {
  RINGD_CHECK_ARG(shards.parts() == devices_,
                  "allgather: " << shards.parts() << " shards for " << devices_ << " devices");
  check_buffers("allgather", buffers, shards.offsets.back() - shards.offsets.front());
  run(Job{Job::Kind::kCopy, buffers, dtype, ReduceOp::kSum, shard_runs(shards)});
}

size_t CpuLocalGroup::staging_piece_bytes() const { return SIZE_MAX; }

namespace {

// Host memory is the buffers themselves: acquire() points into them, nothing is copied.
class CpuHostStaging : public HostStaging {
 public:
  CpuHostStaging(DeviceBuffers buffers, std::vector<HostPiece> pieces, DataType dtype)
      : buffers_(buffers.begin(), buffers.end()), pieces_(std::move(pieces)), dtype_(dtype) {}
  void* acquire(size_t piece) override {
    RINGD_CHECK_ARG(piece < pieces_.size(),
                    "host staging: piece " << piece << " of " << pieces_.size());
    const HostPiece& p = pieces_[piece];
    return static_cast<char*>(buffers_[p.device].data) + p.first * dtype_size(dtype_);
  }
  void release(size_t) override {}
  void finish() override {}

 private:
  std::vector<DeviceBuffer> buffers_;
  std::vector<HostPiece> pieces_;
  DataType dtype_;
};

}  // namespace

std::unique_ptr<HostStaging> CpuLocalGroup::stage(DeviceBuffers buffers,
                                                  std::vector<HostPiece> pieces, DataType dtype,
                                                  HostAccess) {
  check_buffers("stage", buffers, 0);
  for (const HostPiece& piece : pieces) check_device("stage", piece.device);
  return std::make_unique<CpuHostStaging>(buffers, std::move(pieces), dtype);
}

std::shared_ptr<void> CpuLocalGroup::allocate(int device, size_t bytes) {
  check_device("allocate", device);
  void* memory = std::aligned_alloc(64, (bytes / 64 + 1) * 64);
  if (!memory) {
    RINGD_THROW(kIo, "cpu device " << device << ": cannot allocate " << bytes << " bytes");
  }
  return std::shared_ptr<void>(memory, std::free);
}

void CpuLocalGroup::upload(const DeviceBuffer& destination, const void* source, size_t bytes) {
  check_device("upload", destination.device);
  if (bytes > 0) std::memcpy(destination.data, source, bytes);
}

void CpuLocalGroup::download(void* destination, const DeviceBuffer& source, size_t bytes) {
  check_device("download", source.device);
  if (bytes > 0) std::memcpy(destination, source.data, bytes);
}

}  // namespace ringd::device

namespace ringd {

std::unique_ptr<LocalGroup> make_cpu_local_group(int devices, const CpuLocalGroupOptions& options) {
  return std::make_unique<device::CpuLocalGroup>(devices, options);
}

}  // namespace ringd
