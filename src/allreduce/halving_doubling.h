// Rabenseifner's allreduce for mid-sized payloads: a reduce-scatter by recursive halving, then an
// allgather by recursive doubling. Each rank sends 2(p-1)/p of the buffer, like the ring, but in
// 2 log2(p) steps instead of 2(p-1): the ring's volume at close to recursive doubling's latency.
//
// With p the largest power of two <= n, the first 2(n-p) ranks fold first exactly as in
// recursive_doubling.h (even ranks hand their buffer to the odd rank above and wait for the
// result). The p remaining ranks (virtual ranks v) split the buffer into p chunks:
//
//   p = 4, chunks [0 1 2 3]
//   halving, mask 1:  v0<->v1, v2<->v3   v0,v2 keep [0 1] and send [2 3]; v1,v3 the opposite
//   halving, mask 2:  v0<->v2, v1<->v3   v0 keeps [0], v2 [1], v1 [2], v3 [3]
//                     (each step: receive the partner's copy of what we keep, reduce into ours)
//   -> each virtual rank holds one chunk fully reduced (and scaled, for avg)
//   doubling, mask 2: v0<->v2, v1<->v3   swap chunks: v0,v2 hold [0 1]; v1,v3 hold [2 3]
//   doubling, mask 1: v0<->v1, v2<->v3   everyone holds [0 1 2 3]
//
// Every chunk is reduced on exactly one rank and then copied, so all ranks end with identical
// bits. Partners come in recursive doubling's order (nearest first), so each element is the same
// sum, ((x0 + x1) + (x2 + x3)) for p = 4, as there: the two algorithms give the same bits, and
// choosing between them by speed (allreduce_tuner.h) cannot change a result. A step's receive is
// posted before its send; the partner sends the other half at the same time (full duplex).
#pragma once

#include "allreduce/plan.h"

namespace ringd::algo {

// `out` already holds this rank's input; on return it holds the reduced result.
// Needs count >= the largest power of two <= ctx.size() (every chunk non-empty).
void halving_doubling_allreduce(const Operation& op, void* out, size_t count, DataType dtype,
                                ReduceOp reduce_op);

}  // namespace ringd::algo
