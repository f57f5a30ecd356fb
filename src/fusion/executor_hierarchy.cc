// Buckets of an engine over local devices (EngineOptions::local_group): the same buckets as the
// flat engine, each run as one hierarchical collective (ringd/hierarchy.h) over L fusion buffers,
// one per device:
//
//   memcpy in, every device's members into its own fusion buffer (one parallel copy)
//   ->  ONE hierarchical allreduce / broadcast over the L buffers  ->  memcpy out, every device
//
// A cycle's consecutive allreduce buckets go as the parts of ONE hierarchical_allreduce_parts,
// one pipeline: while one bucket is on the network, a helper thread copies the next one in and
// reduces it inside the node, and broadcasts the one before and copies it out; each bucket has its
// own place in the fusion buffers. A bucket of one uncompressed tensor runs on the tensor's own
// buffers. A group whose buffers are
// not host memory (GPUs: LocalGroup::staging_piece_bytes() is finite) cannot be copied into by
// the host: its buckets' members run one by one on their own buffers, without fp16/bf16.
#include <cstdint>
#include <memory>

#include "fusion/executor.h"
#include "ringd/hierarchy.h"

namespace ringd::fusion {
namespace {

// The member's buffer on every device, in device order.
std::vector<DeviceBuffer> device_buffers(const ReadyTensor& ready) {
  std::vector<DeviceBuffer> buffers{{ready.tensor.tensor.data, 0}};
  for (size_t d = 0; d < ready.tensor.other_devices.size(); ++d) {
    buffers.push_back({ready.tensor.other_devices[d], static_cast<int>(d + 1)});
  }
  return buffers;
}

bool host_memory(const LocalGroup& group) { return group.staging_piece_bytes() == SIZE_MAX; }

}  // namespace

void* Executor::device_fusion_buffer(int device, size_t bytes) {
  if (device == 0) return buffer_.reserve(bytes);
  if (device_buffers_.size() < static_cast<size_t>(device)) device_buffers_.resize(device);
  return device_buffers_[device - 1].reserve(bytes);
}

std::vector<Executor::Traffic> Executor::run_hierarchical_allreduces(
    const std::vector<const Bucket*>& buckets, std::vector<ReadyTensor>& ready) {
  LocalGroup& group = *config_.local_group;
  const bool fuse = host_memory(group);
  const int devices = group.size();
  // Fusion buffers for every bucket at once (they are all in the pipeline together): one
  // allocation per device, each bucket at its own offset, 64-byte aligned.
  std::vector<size_t> offsets;
  size_t fused_bytes = 0;
  std::vector<Traffic> traffic(buckets.size());
  std::vector<HierarchicalPart> parts;
  std::vector<size_t> fused_part;  // per bucket: its part when fused, else SIZE_MAX
  for (size_t k = 0; k < buckets.size(); ++k) {
    const Bucket& bucket = *buckets[k];
    const TensorParams& params = ready[bucket.members[0]].tensor.params;
    const Compression compression =
        params.dtype == DataType::kFloat32 && fuse ? params.compression : Compression::kNone;
    traffic[k].compressed_bytes = bucket.bytes;
    if (!fuse || (bucket.members.size() == 1 && compression == Compression::kNone)) {
      // On the tensors' own buffers: no copies.
      for (size_t i : bucket.members) {
        HierarchicalPart part;
        part.buffers = device_buffers(ready[i]);
        part.count = ready[i].tensor.tensor.count();
        part.dtype = params.dtype;
        part.op = params.op;
        parts.push_back(std::move(part));
      }
      fused_part.push_back(SIZE_MAX);
      offsets.push_back(0);
      continue;
    }
    size_t total = 0;
    for (size_t i : bucket.members) total += ready[i].tensor.tensor.count();
    const size_t wire_size = wire_element_size(params.dtype, compression);
    offsets.push_back(fused_bytes);
    fused_bytes += (total * wire_size + 63) / 64 * 64;
    traffic[k].compressed_bytes = total * wire_size;
    HierarchicalPart part;
    part.count = total;
    part.dtype = wire_dtype(params.dtype, compression);
    part.op = params.op;
    fused_part.push_back(parts.size());
    parts.push_back(std::move(part));
  }
  std::vector<uint8_t*> base;
  for (int d = 0; d < devices; ++d) {
    base.push_back(static_cast<uint8_t*>(device_fusion_buffer(d, fused_bytes)));
  }
  for (size_t k = 0; k < buckets.size(); ++k) {
    if (fused_part[k] == SIZE_MAX) continue;
    const Bucket& bucket = *buckets[k];
    HierarchicalPart& part = parts[fused_part[k]];
    const TensorParams& params = ready[bucket.members[0]].tensor.params;
    const Compression compression =
        params.dtype == DataType::kFloat32 ? params.compression : Compression::kNone;
    const bool convert = compression != Compression::kNone;
    const size_t wire_size = wire_element_size(params.dtype, compression);
    for (int d = 0; d < devices; ++d) part.buffers.push_back({base[d] + offsets[k], d});
    auto in = std::make_shared<std::vector<CopyPiece>>();
    auto out = std::make_shared<std::vector<CopyPiece>>();
    size_t offset = 0;
    for (size_t i : bucket.members) {
      const std::vector<DeviceBuffer> buffers = device_buffers(ready[i]);
      const Tensor& tensor = ready[i].tensor.tensor;
      const size_t count = convert ? tensor.count() : tensor.bytes();
      for (int d = 0; d < devices; ++d) {
        uint8_t* place = base[d] + offsets[k] + offset * wire_size;
        in->push_back({buffers[d].data, place, count});
        out->push_back({place, buffers[d].data, count});
      }
      offset += tensor.count();
    }
    // On the pipeline's local thread: the copy into this bucket's buffers overlaps the network
    // step of the bucket before, the copy out that of the bucket after.
    part.before = [this, &bucket, &ready, in, convert, compression] {
      copy(bucket, ready, std::move(*in), convert ? CopyMode::kToCompressed : CopyMode::kPlain,
           compression, "memcpy in");
    };
    part.after = [this, &bucket, &ready, out, convert, compression] {
      copy(bucket, ready, std::move(*out), convert ? CopyMode::kFromCompressed : CopyMode::kPlain,
           compression, "memcpy out");
    };
  }
  const auto start = Timeline::Clock::now();
  hierarchical_allreduce_parts(ctx_, group, parts, config_.hierarchy);
  for (const Bucket* bucket : buckets) mark(*bucket, ready, "allreduce", start);
  return traffic;
}

void Executor::run_hierarchical_broadcast(const Bucket& bucket, std::vector<ReadyTensor>& ready) {
  LocalGroup& group = *config_.local_group;
  const int devices = group.size();
  const int root = ready[bucket.members[0]].tensor.params.root;
  const int root_node = root / devices;
  const int root_device = root % devices;
  if (bucket.members.size() == 1 || !host_memory(group)) {
    const auto start = Timeline::Clock::now();
    for (size_t i : bucket.members) {
      const Tensor& tensor = ready[i].tensor.tensor;
      hierarchical_broadcast(ctx_, group, device_buffers(ready[i]), tensor.count(), tensor.dtype,
                             root_node, root_device, config_.hierarchy);
    }
    mark(bucket, ready, "broadcast", start);
    return;
  }
  std::vector<DeviceBuffer> fused;
  for (int d = 0; d < devices; ++d) fused.push_back({device_fusion_buffer(d, bucket.bytes), d});
  const bool is_root_node = ctx_.rank() == root_node;
  std::vector<CopyPiece> in;
  std::vector<CopyPiece> out;
  size_t offset = 0;
  for (size_t i : bucket.members) {
    const std::vector<DeviceBuffer> buffers = device_buffers(ready[i]);
    const size_t bytes = ready[i].tensor.tensor.bytes();
    for (int d = 0; d < devices; ++d) {
      uint8_t* place = static_cast<uint8_t*>(fused[d].data) + offset;
      if (is_root_node && d == root_device) {
        in.push_back({buffers[d].data, place, bytes});
      } else {
        out.push_back({place, buffers[d].data, bytes});
      }
    }
    offset += bytes;
  }
  if (is_root_node) {
    copy(bucket, ready, std::move(in), CopyMode::kPlain, Compression::kNone, "memcpy in");
  }
  const auto start = Timeline::Clock::now();
  hierarchical_broadcast(ctx_, group, fused, bucket.bytes, DataType::kUInt8, root_node, root_device,
                         config_.hierarchy);
  mark(bucket, ready, "broadcast", start);
  copy(bucket, ready, std::move(out), CopyMode::kPlain, Compression::kNone, "memcpy out");
}

}  // namespace ringd::fusion
