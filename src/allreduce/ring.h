// The pipelined ring: the engine behind ring allreduce, reduce-scatter and allgather.
//
// n ranks stand in a ring; each sends only to its right neighbour (rank+1) and receives only from
// its left (rank-1). The buffer is cut into n chunks (sizes differ by at most one element). At step
// s, rank r sends chunk (r - s + shift) and receives chunk (r - s - 1 + shift) — exactly the chunk
// it will send at step s+1. Example, n = 4, allreduce, shift 0 (a..d = chunks 0..3, X_k = chunk X
// summed over k ranks):
//
//   reduce-scatter (steps 0..n-2: receive into a slot, reduce with own input, forward)
//     step 0:  r0 sends a -> r1   r1 sends b -> r2   r2 sends c -> r3   r3 sends d -> r0
//     step 1:  r0 sends d2->r1    r1 sends a2->r2    r2 sends b2->r3    r3 sends c2->r0
//     step 2:  r0 sends c3->r1    r1 sends d3->r2    r2 sends a3->r3    r3 sends b3->r0
//     now r0 holds b4 (complete), r1 c4, r2 d4, r3 a4
//   allgather (steps n-1..2n-3: receive straight into the output, forward)
//     step 3:  r0 sends b4->r1    r1 sends c4->r2    r2 sends d4->r3    r3 sends a4->r0
//     step 4, 5: the same, until every rank holds a4 b4 c4 d4.
//
// Each chunk is further cut into segments (segment_bytes). Steps are not barriers: the moment a
// segment of step s has been received (and reduced), it is sent on as the same segment of step
// s+1, while up to `segments_in_flight` later receives are already posted. So the ring streams:
// the network, the reduction and the next receive overlap. Every chunk is reduced in one fixed
// order along the ring and then copied, which makes every rank's result bitwise identical.
//
// Each rank moves 2(n-1)/n of the buffer in each direction: bandwidth-optimal, independent of n.
//
// The buffer may be a list of separate pieces (allreduce_list: a fused bucket's tensors where
// they are, without copying them together): chunks and segments are cut over the pieces laid end
// to end as if they were one buffer, and a segment that would cross a piece's end is cut there
// too (every rank cuts the same way), so each message lies in one piece. Elements are reduced in
// the same order as in one buffer, so the result is bitwise the same.
#pragma once

#include <vector>

#include "allreduce/plan.h"

namespace ringd::algo {

// Separate pieces seen as one buffer: piece i holds elements [starts[i], starts[i+1]).
struct PieceList {
  std::vector<char*> bases;    // piece i's memory
  std::vector<size_t> starts;  // bases.size() + 1 entries, starts[0] = 0, non-decreasing
  size_t elem = 0;             // element size in bytes

  // Where element `first` lives, and the first element past its piece.
  char* at(size_t first) const;
  size_t piece_end(size_t first) const;
};

struct RingPass {
  const void* input = nullptr;   // step-0 send source and the reduce operand (reduce steps only)
  void* work = nullptr;          // where chunks are reduced/received and sent from after step 0;
                                 // null = scratch memory (reduce-scatter)
  void* result_chunk = nullptr;  // if set, the final reduced chunk lands here instead of in work
  int result_chunk_index = -1;   // which chunk result_chunk stands for
  size_t count = 0;              // elements in the whole buffer
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int reduce_steps = 0;  // n-1 for allreduce and reduce-scatter, 0 for allgather
  int copy_steps = 0;    // n-1 for allreduce and allgather, 0 for reduce-scatter
  int shift = 0;         // chunk index offset: reduce-scatter uses -1 so rank r ends with chunk r
  const Chunks* chunks = nullptr;
  // Set: input and work are these pieces (in-place allreduce only; input/work/result_chunk unset).
  const PieceList* pieces = nullptr;
};

// Runs the pass on `op.ctx` (size >= 2). For kAvg the reduced chunk is scaled by 1/n once, at the
// last reduce step, before it is forwarded.
void run_ring(const Operation& op, const RingPass& pass);

}  // namespace ringd::algo
