#include "allreduce/broadcast_chain.h"

#include <algorithm>
#include <deque>

namespace ringd::algo {

void chain_broadcast(const Operation& op, void* buf, size_t bytes, int root) {
  Context& ctx = op.ctx;
  const int n = ctx.size();
  const int position = mod(ctx.rank() - root, n);
  const bool has_next = position + 1 < n;
  const size_t segment = std::max<size_t>(1, op.opts.segment_bytes);
  const size_t segments = (bytes + segment - 1) / segment;
  char* data = static_cast<char*>(buf);
  auto length = [&](size_t k) { return std::min(segment, bytes - k * segment); };

  std::vector<RequestPtr> sends;
  if (position == 0) {
    Pair& next = ctx.pair(mod(ctx.rank() + 1, n));
    for (size_t k = 0; k < segments; ++k) {
      sends.push_back(next.isend(data + k * segment, length(k), op.tag(k)));
    }
  } else {
    Pair& previous = ctx.pair(mod(ctx.rank() - 1, n));
    Pair* next = has_next ? &ctx.pair(mod(ctx.rank() + 1, n)) : nullptr;
    const size_t window = std::max<size_t>(1, op.opts.segments_in_flight);
    std::deque<RequestPtr> posted;
    size_t next_post = 0;
    auto post = [&] {
      posted.push_back(
          previous.irecv(data + next_post * segment, length(next_post), op.tag(next_post)));
      ++next_post;
    };
    while (next_post < segments && next_post < window) post();
    for (size_t k = 0; k < segments; ++k) {
      op.wait(*posted.front());
      posted.pop_front();
      if (next_post < segments) post();
      if (next) sends.push_back(next->isend(data + k * segment, length(k), op.tag(k)));
    }
  }
  for (auto& send : sends) op.wait(*send);
}

}  // namespace ringd::algo
