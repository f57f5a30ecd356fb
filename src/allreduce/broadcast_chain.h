// Pipelined chain broadcast. Ranks are ordered from the root: v = (rank - root) mod n, and each
// forwards to v+1. The buffer moves in segments, so while rank v+1 forwards segment k, rank v
// already receives segment k+1:
//
//   root -> v1 -> v2 -> ... -> v(n-1)       time ~ (n - 2 + segments) x segment time
//
// For large buffers every link carries the buffer once, so busbw approaches the link rate.
#pragma once

#include "allreduce/plan.h"

namespace ringd::algo {

void chain_broadcast(const Operation& op, void* buf, size_t bytes, int root);

}  // namespace ringd::algo
