#include "fusion/fusion_plan.h"

#include <map>
#include <tuple>

namespace ringd::fusion {
namespace {

// What must be equal for two tensors to share a bucket.
using FusionKey = std::tuple<CollectiveKind, DataType, ReduceOp, Compression, int>;

FusionKey key_of(const TensorParams& params) {
  switch (params.kind) {
    case CollectiveKind::kAllreduce:
      return {params.kind, params.dtype, params.op, params.compression, 0};
    case CollectiveKind::kBroadcast:  // bytes: any dtype
      return {params.kind, DataType::kUInt8, ReduceOp::kSum, Compression::kNone, params.root};
    case CollectiveKind::kAllgather: break;
  }
  return {params.kind, params.dtype, ReduceOp::kSum, Compression::kNone, -1};
}

}  // namespace

std::vector<Bucket> plan_buckets(const std::vector<ReadyTensor>& ready, size_t threshold_bytes,
                                 size_t max_tensor_bytes, bool copy_free_allreduces) {
  std::vector<Bucket> buckets;
  std::map<FusionKey, size_t> open;  // key -> index of its open bucket
  for (size_t i = 0; i < ready.size(); ++i) {
    const TensorParams& params = ready[i].tensor.params;
    const size_t bytes = ready[i].tensor.tensor.bytes();
    const bool uncompressed_allreduce =
        params.kind == CollectiveKind::kAllreduce &&
        (params.dtype != DataType::kFloat32 || params.compression == Compression::kNone);
    const bool limited = !(copy_free_allreduces && uncompressed_allreduce);
    const bool fusible = params.kind != CollectiveKind::kAllgather && threshold_bytes > 0 &&
                         (!limited || max_tensor_bytes == 0 || bytes <= max_tensor_bytes);
    if (fusible) {
      const FusionKey key = key_of(params);
      const auto it = open.find(key);
      if (it != open.end() && buckets[it->second].bytes + bytes <= threshold_bytes) {
        buckets[it->second].members.push_back(i);
        buckets[it->second].bytes += bytes;
        continue;
      }
      open[key] = buckets.size();
    }
    buckets.push_back(Bucket{params.kind, {i}, bytes});
  }
  return buckets;
}

}  // namespace ringd::fusion
