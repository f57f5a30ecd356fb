#include "allreduce/halving_doubling.h"

#include "allreduce/fold.h"
#include "common/reduce.h"

namespace ringd::algo {
namespace {

// Message indices within the operation's tag space (the fold's are in fold.h).
constexpr uint64_t kHalvingIndex = 1;    // + step
constexpr uint64_t kDoublingIndex = 32;  // + step

}  // namespace

void halving_doubling_allreduce(const Operation& op, void* out, size_t count, DataType dtype,
                                ReduceOp reduce_op) {
  Context& ctx = op.ctx;
  const int n = ctx.size();
  const size_t elem = dtype_size(dtype);
  const size_t bytes = count * elem;
  char* const data = static_cast<char*>(out);
  // Fold: the even rank of each of the first rem pairs sits out, then gets the (scaled) result.
  const Fold fold = fold_in(op, data, ctx.scratch(bytes), count, dtype, reduce_op);
  if (fold.sits_out()) {
    receive_unfolded(op, data, bytes);
    return;
  }
  const int p = fold.p;
  const int virtual_rank = fold.virtual_rank;
  auto real_rank = [&fold](int v) { return fold.real_rank(v); };

  const Chunks chunks(count, p);
  auto at = [&](int chunk) { return data + chunks.offset(chunk) * elem; };
  auto span_bytes = [&](int first, int end) {
    return (chunks.offset(end) - chunks.offset(first)) * elem;
  };
  char* incoming = static_cast<char*>(ctx.scratch(span_bytes(0, p / 2 > 0 ? p / 2 : 1)));

  // Recursive halving: [first, end) is the range of chunks this rank is still responsible for.
  // The nearest partner comes first, as in recursive doubling, so that every element is summed in
  // the same order as there and the two algorithms give the same bits (halving_doubling.h).
  int first = 0, end = p;
  uint64_t step = 0;
  for (int mask = 1; mask < p; mask *= 2, ++step) {
    Pair& pair = ctx.pair(real_rank(virtual_rank ^ mask));
    const int middle = first + (end - first) / 2;
    const bool keep_lower = (virtual_rank & mask) == 0;
    const int keep_first = keep_lower ? first : middle, keep_end = keep_lower ? middle : end;
    const int send_first = keep_lower ? middle : first, send_end = keep_lower ? end : middle;
    const size_t keep_bytes = span_bytes(keep_first, keep_end);
    RequestPtr recv = pair.irecv(incoming, keep_bytes, op.tag(kHalvingIndex + step));
    RequestPtr send =
        pair.isend(at(send_first), span_bytes(send_first, send_end), op.tag(kHalvingIndex + step));
    op.wait(*recv);
    reduce_into(at(keep_first), at(keep_first), incoming, keep_bytes / elem, dtype, reduce_op);
    op.wait(*send);
    first = keep_first;
    end = keep_end;
  }
  if (reduce_op == ReduceOp::kAvg) {
    scale_in_place(at(first), span_bytes(first, end) / elem, dtype, 1.0 / n);
  }

  // Recursive doubling of the owned range until every rank holds all chunks: the halving steps
  // undone in reverse order.
  step = 0;
  for (int mask = p / 2; mask >= 1; mask /= 2, ++step) {
    Pair& pair = ctx.pair(real_rank(virtual_rank ^ mask));
    const int width = end - first;
    const bool mine_lower = (virtual_rank & mask) == 0;
    const int other_first = mine_lower ? end : first - width;
    RequestPtr recv = pair.irecv(at(other_first), span_bytes(other_first, other_first + width),
                                 op.tag(kDoublingIndex + step));
    RequestPtr send = pair.isend(at(first), span_bytes(first, end), op.tag(kDoublingIndex + step));
    op.wait(*recv);
    op.wait(*send);
    first = mine_lower ? first : other_first;
    end = first + 2 * width;
  }

  send_unfolded(op, fold, data, bytes);
}

}  // namespace ringd::algo
