#include "device/cuda/nccl_local_group.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "device/cuda/cuda_errors.h"
#include "device/cuda/current_device.h"
#include "device/cuda/event_wait.h"
#include "device/cuda/nccl_types.h"
#include "device/cuda/reduce_kernels.h"
#include "device/double_buffered_staging.h"
#include "ringd/error.h"

namespace ringd::device {
namespace {

constexpr size_t kMaxPieceBytes = size_t{1} << 30;

std::string device_list(const std::vector<int>& cuda_devices) {
  std::ostringstream os;
  for (size_t d = 0; d < cuda_devices.size(); ++d) os << (d ? "," : "") << cuda_devices[d];
  return os.str();
}

char* at(DeviceBuffers buffers, int device, size_t element, DataType dtype) {
  return static_cast<char*>(buffers[device].data) + element * dtype_size(dtype);
}

bool equal_shards(const ShardLayout& shards) {
  for (int d = 1; d < shards.parts(); ++d) {
    if (shards.count(d) != shards.count(0)) return false;
  }
  return true;
}

}  // namespace

NcclLocalGroup::NcclLocalGroup(std::vector<int> cuda_devices, const NcclLocalGroupOptions& options)
    : cuda_devices_(std::move(cuda_devices)),
      piece_bytes_(options.staging_piece_bytes),
      spin_(event_spin(options.spin_us)) {
  RINGD_CHECK_ARG(!cuda_devices_.empty(),
                  "nccl local group: no CUDA devices given; pass at least one CUDA ordinal");
  RINGD_CHECK_ARG(piece_bytes_ >= 1 && piece_bytes_ <= kMaxPieceBytes,
                  "nccl local group: staging piece of " << piece_bytes_ << " bytes; use 1 byte to "
                                                        << kMaxPieceBytes);
  std::set<int> seen;
  for (int device : cuda_devices_) {
    RINGD_CHECK_ARG(device >= 0 && seen.insert(device).second,
                    "nccl local group of CUDA devices "
                        << device_list(cuda_devices_) << ": device " << device
                        << (device < 0 ? " is negative" : " appears twice")
                        << "; name each GPU once, by its CUDA ordinal");
  }
  const int available = cuda_device_count();
  if (available == 0) {
    RINGD_THROW(kUnavailable, "nccl local group of CUDA devices "
                                  << device_list(cuda_devices_) << ": no usable CUDA device ("
                                  << cuda_device_status()
                                  << "); run on a GPU node, or use CPU devices");
  }
  for (int device : cuda_devices_) {
    RINGD_CHECK_ARG(device < available, "nccl local group: CUDA device "
                                            << device << " does not exist; this process sees "
                                            << available << " (0.." << available - 1
                                            << "; check CUDA_VISIBLE_DEVICES)");
  }
  const int devices = size();
  try {
    comms_.assign(devices, nullptr);
    RINGD_NCCL_CHECK(ncclCommInitAll(comms_.data(), devices, cuda_devices_.data()),
                     "nccl local group of CUDA devices " << device_list(cuda_devices_));
    streams_.assign(devices, nullptr);
    done_.assign(devices, nullptr);
    for (int d = 0; d < devices; ++d) {
      CurrentDevice current(cuda_devices_[d]);
      RINGD_CUDA_CHECK(cudaStreamCreateWithFlags(&streams_[d], cudaStreamNonBlocking),
                       "nccl local group, CUDA device " << cuda_devices_[d] << ": stream");
      RINGD_CUDA_CHECK(
          cudaEventCreateWithFlags(&done_[d], cudaEventDisableTiming | cudaEventBlockingSync),
          "nccl local group, CUDA device " << cuda_devices_[d] << ": event");
    }
    copier_ = std::make_unique<CudaPieceCopier>(cuda_devices_, spin_);
    copier_->reserve_slots(piece_bytes_);  // once, here: no call allocates pinned memory
  } catch (...) {
    release_resources();
    throw;
  }
}

NcclLocalGroup::~NcclLocalGroup() { release_resources(); }

void NcclLocalGroup::release_resources() noexcept {
  copier_.reset();
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  for (size_t d = 0; d < streams_.size(); ++d) {
    if (cudaSetDevice(cuda_devices_[d]) != cudaSuccess) continue;
    if (streams_[d] != nullptr) {
      cudaStreamSynchronize(streams_[d]);
      cudaStreamDestroy(streams_[d]);
    }
    if (done_[d] != nullptr) cudaEventDestroy(done_[d]);
  }
  streams_.clear();
  done_.clear();
  for (ncclComm_t comm : comms_) {
    if (comm != nullptr) ncclCommDestroy(comm);
  }
  comms_.clear();
  if (previous >= 0) cudaSetDevice(previous);
  cudaGetLastError();
}

void NcclLocalGroup::check_device(const char* what, int device) const {
  RINGD_CHECK_ARG(device >= 0 && device < size(), what << ": device " << device
                                                       << " is not in this local group of "
                                                       << size() << " nccl devices");
}

void NcclLocalGroup::run_grouped(
    const std::string& what, const std::function<void(int, ncclComm_t, cudaStream_t)>& per_device) {
  const std::string where =
      "nccl local group (CUDA devices " + device_list(cuda_devices_) + "): " + what;
  if (!broken_.empty()) {
    RINGD_THROW(kUnavailable, where << ": this group is unusable since an earlier failure ("
                                    << broken_ << "); destroy it and make a new one");
  }
  try {
    RINGD_NCCL_CHECK(ncclGroupStart(), where);
    try {
      for (int d = 0; d < size(); ++d) per_device(d, comms_[d], streams_[d]);
    } catch (...) {
      ncclGroupEnd();  // close the group the failed call was part of
      throw;
    }
    RINGD_NCCL_CHECK(ncclGroupEnd(), where);
    wait_for_streams(where);
  } catch (const Error& error) {
    // Some devices may have work queued that waits for the others forever: nothing may be queued
    // behind it.
    broken_ = error.what();
    throw;
  }
}

void NcclLocalGroup::wait_for_streams(const std::string& where) {
  for (int d = 0; d < size(); ++d) {
    CurrentDevice current(cuda_devices_[d]);
    RINGD_CUDA_CHECK(cudaEventRecord(done_[d], streams_[d]),
                     where << ", CUDA device " << cuda_devices_[d]);
  }
  for (int d = 0; d < size(); ++d) {
    const cudaError_t status = wait_for_event(done_[d], spin_);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comms_[d], &async);
    RINGD_NCCL_CHECK(async, where << ", CUDA device " << cuda_devices_[d]);
    RINGD_CUDA_CHECK(status, where << ", CUDA device " << cuda_devices_[d]);
  }
}

void NcclLocalGroup::reduce_to_leader(DeviceBuffers buffers, size_t first, size_t count,
                                      DataType dtype, ReduceOp op, int leader) {
  check_buffers("reduce_to_leader", buffers, count);
  check_device("reduce_to_leader", leader);
  const ncclRedOp_t nccl_op = nccl_reduce_op(op, dtype);
  const ncclDataType_t type = nccl_data_type(dtype);
  if (count == 0 || size() == 1) return;  // one device: the result is its input
  std::ostringstream what;
  what << "reduce_to_leader (" << count << " x " << dtype_name(dtype) << " " << reduce_op_name(op)
       << ", leader " << leader << ")";
  run_grouped(what.str(), [&](int d, ncclComm_t comm, cudaStream_t stream) {
    char* data = at(buffers, d, first, dtype);
    RINGD_NCCL_CHECK(ncclReduce(data, data, count, type, nccl_op, leader, comm, stream),
                     "device " << d);
  });
}

void NcclLocalGroup::broadcast_from_leader(DeviceBuffers buffers, size_t first, size_t count,
                                           DataType dtype, int leader) {
  check_buffers("broadcast_from_leader", buffers, count);
  check_device("broadcast_from_leader", leader);
  const ncclDataType_t type = nccl_data_type(dtype);
  if (count == 0 || size() == 1) return;
  std::ostringstream what;
  what << "broadcast_from_leader (" << count << " x " << dtype_name(dtype) << ", leader " << leader
       << ")";
  run_grouped(what.str(), [&](int d, ncclComm_t comm, cudaStream_t stream) {
    char* data = at(buffers, d, first, dtype);
    RINGD_NCCL_CHECK(ncclBroadcast(data, data, count, type, leader, comm, stream), "device " << d);
  });
}

void NcclLocalGroup::reduce_scatter(DeviceBuffers buffers, const ShardLayout& shards,
                                    DataType dtype, ReduceOp op) {
  RINGD_CHECK_ARG(shards.parts() == size(),
                  "reduce_scatter: " << shards.parts() << " shards for " << size() << " devices");
  const size_t total = shards.offsets.back() - shards.offsets.front();
  check_buffers("reduce_scatter", buffers, total);
  const ncclRedOp_t nccl_op = nccl_reduce_op(op, dtype);
  const ncclDataType_t type = nccl_data_type(dtype);
  if (total == 0 || size() == 1) return;
  std::ostringstream what;
  what << "reduce_scatter (" << total << " x " << dtype_name(dtype) << " " << reduce_op_name(op)
       << ")";
  if (equal_shards(shards)) {  // shard d at first(0) + d * each: NCCL's in-place layout
    const size_t each = shards.count(0);
    run_grouped(what.str(), [&](int d, ncclComm_t comm, cudaStream_t stream) {
      RINGD_NCCL_CHECK(ncclReduceScatter(at(buffers, d, shards.first(0), dtype),
                                         at(buffers, d, shards.first(d), dtype), each, type,
                                         nccl_op, comm, stream),
                       "device " << d);
    });
    return;
  }
  run_grouped(what.str() + ", uneven shards", [&](int d, ncclComm_t comm, cudaStream_t stream) {
    for (int shard = 0; shard < size(); ++shard) {
      if (shards.count(shard) == 0) continue;
      char* data = at(buffers, d, shards.first(shard), dtype);
      RINGD_NCCL_CHECK(
          ncclReduce(data, data, shards.count(shard), type, nccl_op, shard, comm, stream),
          "device " << d << ", shard " << shard);
    }
  });
}

void NcclLocalGroup::allgather(DeviceBuffers buffers, const ShardLayout& shards, DataType dtype) {
  RINGD_CHECK_ARG(shards.parts() == size(),
                  "allgather: " << shards.parts() << " shards for " << size() << " devices");
  const size_t total = shards.offsets.back() - shards.offsets.front();
  check_buffers("allgather", buffers, total);
  const ncclDataType_t type = nccl_data_type(dtype);
  if (total == 0 || size() == 1) return;
  std::ostringstream what;
  what << "allgather (" << total << " x " << dtype_name(dtype) << ")";
  if (equal_shards(shards)) {
    const size_t each = shards.count(0);
    run_grouped(what.str(), [&](int d, ncclComm_t comm, cudaStream_t stream) {
      RINGD_NCCL_CHECK(
          ncclAllGather(at(buffers, d, shards.first(d), dtype),
                        at(buffers, d, shards.first(0), dtype), each, type, comm, stream),
          "device " << d);
    });
    return;
  }
  run_grouped(what.str() + ", uneven shards", [&](int d, ncclComm_t comm, cudaStream_t stream) {
    for (int shard = 0; shard < size(); ++shard) {
      if (shards.count(shard) == 0) continue;
      char* data = at(buffers, d, shards.first(shard), dtype);
      RINGD_NCCL_CHECK(ncclBroadcast(data, data, shards.count(shard), type, shard, comm, stream),
                       "device " << d << ", shard " << shard);
    }
  });
}

std::unique_ptr<HostStaging> NcclLocalGroup::stage(DeviceBuffers buffers,
                                                   std::vector<HostPiece> pieces, DataType dtype,
                                                   HostAccess access) {
  check_buffers("stage", buffers, 0);
  for (const HostPiece& piece : pieces) check_device("stage", piece.device);
  return std::make_unique<DoubleBufferedStaging>(*copier_, buffers, std::move(pieces), dtype,
                                                 access);
}

std::shared_ptr<void> NcclLocalGroup::allocate(int device, size_t bytes) {
  check_device("allocate", device);
  const int cuda_device = cuda_devices_[device];
  CurrentDevice current(cuda_device);
  void* memory = nullptr;
  RINGD_CUDA_CHECK(
      cudaMalloc(&memory, std::max<size_t>(bytes, 1)),
      "nccl local group, CUDA device " << cuda_device << ": allocating " << bytes << " bytes");
  return std::shared_ptr<void>(memory, [cuda_device](void* pointer) {
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    cudaSetDevice(cuda_device);
    cudaFree(pointer);
    if (previous >= 0) cudaSetDevice(previous);
  });
}

void NcclLocalGroup::upload(const DeviceBuffer& destination, const void* source, size_t bytes) {
  check_device("upload", destination.device);
  if (bytes == 0) return;
  const int cuda_device = cuda_devices_[destination.device];
  CurrentDevice current(cuda_device);
  RINGD_CUDA_CHECK(
      cudaMemcpy(destination.data, source, bytes, cudaMemcpyHostToDevice),
      "nccl local group, CUDA device " << cuda_device << ": upload of " << bytes << " bytes");
}

void NcclLocalGroup::download(void* destination, const DeviceBuffer& source, size_t bytes) {
  check_device("download", source.device);
  if (bytes == 0) return;
  const int cuda_device = cuda_devices_[source.device];
  CurrentDevice current(cuda_device);
  RINGD_CUDA_CHECK(
      cudaMemcpy(destination, source.data, bytes, cudaMemcpyDeviceToHost),
      "nccl local group, CUDA device " << cuda_device << ": download of " << bytes << " bytes");
}

}  // namespace ringd::device

namespace ringd {

std::unique_ptr<LocalGroup> make_nccl_local_group(const std::vector<int>& cuda_devices,
                                                  const NcclLocalGroupOptions& options) {
  return std::make_unique<device::NcclLocalGroup>(cuda_devices, options);
}

}  // namespace ringd
