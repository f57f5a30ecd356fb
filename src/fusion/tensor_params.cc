#include "fusion/tensor_params.h"

#include <algorithm>
#include <sstream>

namespace ringd::fusion {

bool params_agree(const TensorParams& a, const TensorParams& b) {
  if (a.kind != CollectiveKind::kAllgather || b.kind != CollectiveKind::kAllgather) return a == b;
  if (a.dtype != b.dtype || a.group != b.group || a.group_size != b.group_size) return false;
  if (a.shape.size() != b.shape.size() || a.shape.empty()) return false;
  return std::equal(a.shape.begin() + 1, a.shape.end(), b.shape.begin() + 1);
}

std::string describe_shape(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

std::string describe(const TensorParams& params) {
  std::ostringstream os;
  switch (params.kind) {
    case CollectiveKind::kAllreduce:
      os << "allreduce " << dtype_name(params.dtype) << " " << reduce_op_name(params.op);
      break;
    case CollectiveKind::kBroadcast:
      os << "broadcast " << dtype_name(params.dtype) << " from rank " << params.root;
      break;
    case CollectiveKind::kAllgather: os << "allgather " << dtype_name(params.dtype); break;
  }
  os << " " << describe_shape(params.shape);
  if (params.compression != Compression::kNone) {
    os << " " << compression_name(params.compression) << " wire";
  }
  if (params.group_size > 0) os << " group '" << params.group << "' of " << params.group_size;
  return os.str();
}

size_t element_count(const std::vector<int64_t>& shape) {
  size_t count = 1;
  for (int64_t dim : shape) count *= static_cast<size_t>(dim);
  return count;
}

bool response_matches(const Response& response, const TensorParams& mine, int rank) {
  if (!response.ok()) return false;
  if (mine.kind != CollectiveKind::kAllgather) return response.params == mine;
  if (!params_agree(response.params, mine)) return false;
  return rank >= 0 && static_cast<size_t>(rank) < response.first_dims.size() &&
         response.first_dims[rank] == mine.shape[0];
}

}  // namespace ringd::fusion
