#include "allreduce/fold.h"

#include "common/reduce.h"

namespace ringd::algo {

Fold fold_in(const Operation& op, void* data, void* scratch, size_t count, DataType dtype,
             ReduceOp reduce_op) {
  Context& ctx = op.ctx;
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t bytes = count * dtype_size(dtype);
  Fold fold;
  while (fold.p * 2 <= n) fold.p *= 2;
  fold.rem = n - fold.p;
  if (rank >= 2 * fold.rem) {
    fold.virtual_rank = rank - fold.rem;
    return fold;
  }
  if (rank % 2 == 0) {
    RequestPtr send = ctx.pair(rank + 1).isend(data, bytes, op.tag(kFoldIndex));
    op.wait(*send);
    return fold;  // sits out
  }
  RequestPtr recv = ctx.pair(rank - 1).irecv(scratch, bytes, op.tag(kFoldIndex));
  op.wait(*recv);
  reduce_into(data, data, scratch, count, dtype, reduce_op);
  fold.virtual_rank = rank / 2;
  return fold;
}

void receive_unfolded(const Operation& op, void* data, size_t bytes) {
  RequestPtr recv = op.ctx.pair(op.ctx.rank() + 1).irecv(data, bytes, op.tag(kUnfoldIndex));
  op.wait(*recv);
}

void send_unfolded(const Operation& op, const Fold& fold, const void* data, size_t bytes) {
  const int rank = op.ctx.rank();
  if (rank >= 2 * fold.rem) return;
  RequestPtr send = op.ctx.pair(rank - 1).isend(data, bytes, op.tag(kUnfoldIndex));
  op.wait(*send);
}

}  // namespace ringd::algo
