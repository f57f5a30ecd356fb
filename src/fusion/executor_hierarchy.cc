// Buckets of an engine over local devices (EngineOptions::local_group): the same buckets as the
// flat engine, each run as one hierarchical collective (ringd/hierarchy.h) over L fusion buffers,
// one per device:
//
//   memcpy in, every device's members into its own fusion buffer (one parallel copy)
//   ->  ONE hierarchical allreduce / broadcast over the L buffers  ->  memcpy out, every device
//
// A cycle's consecutive allreduce buckets go as the parts of ONE hierarchical_allreduce_parts,
// one pipeline: while one bucket is on the network, a helper thread copies the next one in and
// reduces it inside the node, and broadcasts the one before and copies it out (the fused buckets
// alternate between two fusion buffer slots per device, as in the flat pipeline of executor.h).
// Uncompressed buckets are not copied at all: each member is a part on its own buffers, and on
// host memory hierarchical_allreduce_parts cuts consecutive parts of one dtype and op into its
// chunks as if they were one buffer, so small tensors share a ring without a fusion buffer (as
// the flat engine's allreduce_list). Only fp16/bf16 buckets are fused, converting as they copy.
// A group whose buffers are not host memory (GPUs: LocalGroup::staging_piece_bytes() is finite)
// cannot be copied into by the host: its buckets' members run one by one on their own buffers,
// each its own chunks, without fp16/bf16.
#include <cstdint>
#include <memory>

#include "fusion/executor.h"
#include "ringd/hierarchy.h"

namespace ringd::fusion {

std::vector<Executor::Traffic> Executor::run_hierarchical_allreduces(
    const std::vector<const Bucket*>& buckets, std::vector<ReadyTensor>& ready) {
  LocalGroup& group = *config_.local_group;
  const int devices = group.size();
  const std::vector<AllreducePlan> plans =
      plan_allreduces(buckets, ready, devices, host_memory(group), /*lists=*/true);
  std::vector<Traffic> traffic(plans.size());
  std::vector<HierarchicalPart> parts;
  for (size_t k = 0; k < plans.size(); ++k) {
    const AllreducePlan& plan = plans[k];
    const TensorParams& params = ready[plan.bucket->members[0]].tensor.params;
    traffic[k].compressed_bytes = plan.total * plan.wire_size;
    if (plan.in_place) {
      // On the tensors' own buffers, one part per member: no copies.
      for (size_t i : plan.bucket->members) {
        HierarchicalPart part;
        part.buffers = device_buffers(ready[i]);
        part.count = ready[i].tensor.tensor.count();
        part.dtype = params.dtype;
        part.op = params.op;
        parts.push_back(std::move(part));
      }
      continue;
    }
    HierarchicalPart part;
    for (int d = 0; d < devices; ++d) part.buffers.push_back({fusion_buffer(d, plan.slot, 0), d});
    part.count = plan.total;
    part.dtype = plan.wire;
    part.op = params.op;
    auto in = std::make_shared<std::vector<CopyPiece>>();
    auto out = std::make_shared<std::vector<CopyPiece>>();
    fused_pieces(plan, ready, devices, in.get(), out.get());
    // On the pipeline's local thread: the copy into this bucket's slot overlaps the network step
    // of the bucket before, the copy out that of the bucket after.
    part.before = [this, &plan, &ready, in] { copy_plan(plan, ready, std::move(*in), true); };
    part.after = [this, &plan, &ready, out] { copy_plan(plan, ready, std::move(*out), false); };
    parts.push_back(std::move(part));
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
  for (int d = 0; d < devices; ++d) fused.push_back({fusion_buffer(d, 0, bucket.bytes), d});
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
