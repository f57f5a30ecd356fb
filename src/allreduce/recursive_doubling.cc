#include "allreduce/recursive_doubling.h"

#include "allreduce/fold.h"
#include "common/reduce.h"

namespace ringd::algo {

void recursive_doubling_allreduce(const Operation& op, void* out, size_t count, DataType dtype,
                                  ReduceOp reduce_op) {
  Context& ctx = op.ctx;
  const size_t bytes = count * dtype_size(dtype);
  void* incoming = ctx.scratch(bytes);

  const Fold fold = fold_in(op, out, incoming, count, dtype, reduce_op);
  if (fold.sits_out()) {
    receive_unfolded(op, out, bytes);
  } else {
    uint64_t round = 1;
    for (int mask = 1; mask < fold.p; mask <<= 1, ++round) {
      Pair& pair = ctx.pair(fold.real_rank(fold.virtual_rank ^ mask));
      RequestPtr recv = pair.irecv(incoming, bytes, op.tag(round));
      RequestPtr send = pair.isend(out, bytes, op.tag(round));
      op.wait(*recv);
      op.wait(*send);
      reduce_into(out, out, incoming, count, dtype, reduce_op);
    }
    // The (unscaled) result goes back to the folded partner, which scales it the same way.
    send_unfolded(op, fold, out, bytes);
  }
  if (reduce_op == ReduceOp::kAvg) scale_in_place(out, count, dtype, 1.0 / ctx.size());
}

}  // namespace ringd::algo
