#include "allreduce/recursive_doubling.h"

#include "common/reduce.h"

namespace ringd::algo {

void recursive_doubling_allreduce(const Operation& op, void* out, size_t count, DataType dtype,
                                  ReduceOp reduce_op) {
  Context& ctx = op.ctx;
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t bytes = count * dtype_size(dtype);
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  void* incoming = ctx.scratch(bytes);
  constexpr uint64_t kFoldIndex = 0, kUnfoldIndex = 63;

  auto exchange = [&](int peer, uint64_t index) {
    Pair& pair = ctx.pair(peer);
    RequestPtr recv = pair.irecv(incoming, bytes, op.tag(index));
    RequestPtr send = pair.isend(out, bytes, op.tag(index));
    op.wait(*recv);
    op.wait(*send);
    reduce_into(out, out, incoming, count, dtype, reduce_op);
  };

  // Fold: even ranks below 2*rem give their data to the odd rank above and sit out.
  int virtual_rank;
  if (rank < 2 * rem) {
    if (rank % 2 == 0) {
      RequestPtr send = ctx.pair(rank + 1).isend(out, bytes, op.tag(kFoldIndex));
      op.wait(*send);
      RequestPtr recv = ctx.pair(rank + 1).irecv(out, bytes, op.tag(kUnfoldIndex));
      op.wait(*recv);
      if (reduce_op == ReduceOp::kAvg) scale_in_place(out, count, dtype, 1.0 / n);
      return;
    }
    RequestPtr recv = ctx.pair(rank - 1).irecv(incoming, bytes, op.tag(kFoldIndex));
    op.wait(*recv);
    reduce_into(out, out, incoming, count, dtype, reduce_op);
    virtual_rank = rank / 2;
  } else {
    virtual_rank = rank - rem;
  }

  uint64_t round = 1;
  for (int mask = 1; mask < p; mask <<= 1, ++round) {
    const int partner_virtual = virtual_rank ^ mask;
    const int partner = partner_virtual < rem ? partner_virtual * 2 + 1 : partner_virtual + rem;
    exchange(partner, round);
  }

  // Unfold: hand the (unscaled) result back to the folded partner, which scales it the same way.
  if (rank < 2 * rem) {
    RequestPtr send = ctx.pair(rank - 1).isend(out, bytes, op.tag(kUnfoldIndex));
    op.wait(*send);
  }
  if (reduce_op == ReduceOp::kAvg) scale_in_place(out, count, dtype, 1.0 / n);
}

}  // namespace ringd::algo
