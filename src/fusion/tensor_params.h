// What a rank submitted under a name, as the negotiation compares it, and the coordinator's
// answer for a tensor. Plain structs; proto/negotiation.proto carries them between ranks
// (negotiation_codec.h converts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ringd/engine.h"
#include "ringd/types.h"

namespace ringd::fusion {

struct TensorParams {
  CollectiveKind kind = CollectiveKind::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;                  // allreduce only (kSum otherwise)
  int root = 0;                                  // broadcast only (0 otherwise)
  Compression compression = Compression::kNone;  // float32 allreduce only
  std::vector<int64_t> shape;
  std::string group;        // empty = not grouped
  uint32_t group_size = 0;  // 0 = not grouped

  bool operator==(const TensorParams&) const = default;
};

// Whether two ranks' submissions of one name agree: equal, except that an allgather's first
// dimension may differ.
bool params_agree(const TensorParams& a, const TensorParams& b);

// "allreduce float sum [64, 3, 3]" (+ " bf16 wire", " group 'g' of 3"): for error messages.
std::string describe(const TensorParams& params);
std::string describe_shape(const std::vector<int64_t>& shape);
size_t element_count(const std::vector<int64_t>& shape);

// The coordinator's answer for one tensor every rank has requested.
struct Response {
  std::string name;
  TensorParams params;              // agreed parameters (rank 0's)
  std::vector<int64_t> first_dims;  // allgather: the first dimension on every rank
  std::string error;                // non-empty: the ranks disagree; every rank fails the tensor

  bool ok() const { return error.empty(); }
};

// Whether `mine` (this rank's submission) is what the cached `response` answered, so the cached
// answer can be reused without asking the coordinator.
bool response_matches(const Response& response, const TensorParams& mine, int rank);

}  // namespace ringd::fusion
