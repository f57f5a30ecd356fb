// Latency-optimal allreduce for small payloads: ceil(log2 n) rounds of whole-buffer exchanges.
//
// With p the largest power of two <= n, the first 2(n - p) ranks fold in pairs first (fold.h). The
// remaining p ranks run log2(p) rounds; in round k every rank swaps buffers with the rank whose
// (virtual) number differs in bit k, and both combine. Finally the folded partners get the result.
//
//   n = 6 (p = 4, rem = 2):   fold 0->1, 2->3;  virtual ranks {1,3,4,5} = v{0,1,2,3}
//   round 0: v0<->v1, v2<->v3   round 1: v0<->v2, v1<->v3   unfold 1->0, 3->2
//
// Both sides of an exchange compute a op b with the operands swapped, which is bitwise the same
// for every supported op, so all ranks end with identical bits.
#pragma once

#include "allreduce/plan.h"

namespace ringd::algo {

// `out` already holds this rank's input; on return it holds the reduced result.
void recursive_doubling_allreduce(const Operation& op, void* out, size_t count, DataType dtype,
                                  ReduceOp reduce_op);

}  // namespace ringd::algo
