#include "allreduce/ring.h"

#include <algorithm>
#include <cstring>
#include <deque>

#include "common/reduce.h"
#include "ringd/error.h"

namespace ringd::algo {
namespace {

// One message of the pass, as seen by the receiving rank: step s, segment k of the chunk received
// at that step.
struct Message {
  int step;
  int chunk;
  size_t first;  // element offset in the buffer
  size_t count;  // elements
};

}  // namespace

void run_ring(const Operation& op, const RingPass& pass) {
  Context& ctx = op.ctx;
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t elem = dtype_size(pass.dtype);
  const size_t segment_elems = std::max<size_t>(1, op.opts.segment_bytes / elem);
  const int total_steps = pass.reduce_steps + pass.copy_steps;
  Pair& right = ctx.pair(mod(rank + 1, n));
  Pair& left = ctx.pair(mod(rank - 1, n));

  // Scratch: `window` receive slots for reduce steps, then (reduce-scatter only) a work buffer.
  const size_t window = std::max<size_t>(1, op.opts.segments_in_flight);
  const size_t slots_bytes = (window * segment_elems * elem + 63) / 64 * 64;
  char* slots = static_cast<char*>(ctx.scratch(slots_bytes + (pass.work ? 0 : pass.count * elem)));
  const char* input = static_cast<const char*>(pass.input);
  char* work = pass.work ? static_cast<char*>(pass.work) : slots + slots_bytes;
  auto work_ptr = [&](int chunk, size_t first) -> char* {
    if (pass.result_chunk && chunk == pass.result_chunk_index) {
      return static_cast<char*>(pass.result_chunk) + (first - pass.chunks->offset(chunk)) * elem;
    }
    return work + first * elem;
  };

  // Everything this rank will receive, in order. The left neighbour sends exactly this sequence.
  std::vector<Message> recvs;
  for (int s = 0; s < total_steps; ++s) {
    const int chunk = mod(rank - s - 1 + pass.shift, n);
    const size_t begin = pass.chunks->offset(chunk), count = pass.chunks->count(chunk);
    for (size_t k = 0; k * segment_elems < count; ++k) {
      recvs.push_back({s, chunk, begin + k * segment_elems,
                       std::min(segment_elems, count - k * segment_elems)});
    }
  }

  std::vector<RequestPtr> sends;
  uint64_t send_index = 0;
  auto send_segment = [&](const char* data, size_t count) {
    sends.push_back(right.isend(data, count * elem, op.tag(send_index++)));
  };

  // Step 0: this rank's own first chunk, straight from the input (or work for allgather).
  {
    const int chunk = mod(rank + pass.shift, n);
    const size_t begin = pass.chunks->offset(chunk), count = pass.chunks->count(chunk);
    const char* source = pass.reduce_steps > 0 ? input : work;
    for (size_t k = 0; k * segment_elems < count; ++k) {
      send_segment(source + (begin + k * segment_elems) * elem,
                   std::min(segment_elems, count - k * segment_elems));
    }
  }

  std::deque<RequestPtr> posted;  // receives posted ahead, front = recvs[next_wait]
  size_t next_post = 0;
  auto post_receive = [&]() {
    const Message& m = recvs[next_post];
    void* destination = m.step < pass.reduce_steps
                            ? slots + (next_post % window) * segment_elems * elem
                            : work_ptr(m.chunk, m.first);
    posted.push_back(left.irecv(destination, m.count * elem, op.tag(next_post)));
    ++next_post;
  };
  while (next_post < recvs.size() && next_post < window) post_receive();

  for (size_t i = 0; i < recvs.size(); ++i) {
    const Message& m = recvs[i];
    op.wait(*posted.front());
    posted.pop_front();
    char* target = work_ptr(m.chunk, m.first);
    if (m.step < pass.reduce_steps) {
      const char* slot = slots + (i % window) * segment_elems * elem;
      reduce_into(target, input + m.first * elem, slot, m.count, pass.dtype, pass.op);
      if (pass.op == ReduceOp::kAvg && m.step == pass.reduce_steps - 1) {
        scale_in_place(target, m.count, pass.dtype, 1.0 / n);
      }
    }
    if (next_post < recvs.size()) post_receive();  // the slot of message i is free again
    if (m.step + 1 < total_steps) send_segment(target, m.count);
  }
  for (auto& send : sends) op.wait(*send);
}

}  // namespace ringd::algo
