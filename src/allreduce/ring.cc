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

// Calls f(first, count) for the segments of elements [begin, begin + count): at most
// segment_elems each, and none crossing a piece's end. Both neighbours cut a chunk the same way.
template <typename F>
void for_each_segment(size_t begin, size_t count, size_t segment_elems, const PieceList* pieces,
                      F f) {
  const size_t end = begin + count;
  for (size_t first = begin; first < end;) {
    size_t last = std::min(end, first + segment_elems);
    if (pieces) last = std::min(last, pieces->piece_end(first));
    f(first, last - first);
    first = last;
  }
}

}  // namespace

char* PieceList::at(size_t first) const {
  const size_t piece =
      static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), first) - starts.begin()) -
      1;
  return bases[piece] + (first - starts[piece]) * elem;
}

size_t PieceList::piece_end(size_t first) const {
  return *std::upper_bound(starts.begin(), starts.end(), first);
}

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
  const bool own_work = pass.work || pass.pieces;  // else reduce-scatter works in scratch
  char* slots = static_cast<char*>(ctx.scratch(slots_bytes + (own_work ? 0 : pass.count * elem)));
  const PieceList* pieces = pass.pieces;
  const char* input = static_cast<const char*>(pass.input);
  char* work = own_work ? static_cast<char*>(pass.work) : slots + slots_bytes;
  auto input_ptr = [&](size_t first) -> const char* {
    return pieces ? pieces->at(first) : input + first * elem;
  };
  auto work_ptr = [&](int chunk, size_t first) -> char* {
    if (pieces) return pieces->at(first);
    if (pass.result_chunk && chunk == pass.result_chunk_index) {
      return static_cast<char*>(pass.result_chunk) + (first - pass.chunks->offset(chunk)) * elem;
    }
    return work + first * elem;
  };

  // Everything this rank will receive, in order. The left neighbour sends exactly this sequence.
  std::vector<Message> recvs;
  for (int s = 0; s < total_steps; ++s) {
    const int chunk = mod(rank - s - 1 + pass.shift, n);
    for_each_segment(pass.chunks->offset(chunk), pass.chunks->count(chunk), segment_elems, pieces,
                     [&](size_t first, size_t count) {
                       recvs.push_back({s, chunk, first, count});
                     });
  }

  std::vector<RequestPtr> sends;
  uint64_t send_index = 0;
  auto send_segment = [&](const char* data, size_t count) {
    sends.push_back(right.isend(data, count * elem, op.tag(send_index++)));
  };

  // Step 0: this rank's own first chunk, straight from the input (or work for allgather).
  {
    const int chunk = mod(rank + pass.shift, n);
    for_each_segment(
        pass.chunks->offset(chunk), pass.chunks->count(chunk), segment_elems, pieces,
        [&](size_t first, size_t count) {
          send_segment(pass.reduce_steps > 0 ? input_ptr(first) : work_ptr(chunk, first), count);
        });
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
      reduce_into(target, input_ptr(m.first), slot, m.count, pass.dtype, pass.op);
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
