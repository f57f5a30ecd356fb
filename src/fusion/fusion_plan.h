// Which ready tensors share one collective. A pure function of the ready list (identical on every
// rank), so every rank builds the same buckets in the same order without talking.
//
//   ready:   a:f32 sum 3MB   b:f32 sum 40MB   c:f16 avg 1MB   d:f32 sum 30MB   e:bcast root 0
//   64M:     [a b]           [c]              [d]             [e]
//             ^ a bucket stays open for its (kind, dtype, op, compression) until the next tensor
//               of that key would overflow the threshold; then a new one opens
//
// Allreduces fuse by (dtype, op, compression); broadcasts by root (as bytes); allgathers run
// alone. A tensor larger than the threshold, or a threshold of 0, makes a bucket of one. So does a
// tensor larger than `max_tensor_bytes` (when not 0): fusion saves a collective's latency, which
// for a large tensor is less than what copying it into the buffer and back costs; alone, it runs
// in place on the caller's memory. With `copy_free_allreduces` (the flat engine, whose
// uncompressed buckets run on their members' own buffers: allreduce_list) the limit applies only
// to what is copied: compressed allreduces and broadcasts.
#pragma once

#include <cstddef>
#include <vector>

#include "fusion/pending.h"

namespace ringd::fusion {

struct Bucket {
  CollectiveKind kind = CollectiveKind::kAllreduce;
  std::vector<size_t> members;  // indices into the ready list, in ready order
  size_t bytes = 0;             // payload bytes of the members (before any compression)
};

std::vector<Bucket> plan_buckets(const std::vector<ReadyTensor>& ready, size_t threshold_bytes,
                                 size_t max_tensor_bytes, bool copy_free_allreduces = false);

}  // namespace ringd::fusion
