#include "allreduce/halving_doubling.h"

#include "common/reduce.h"

namespace ringd::algo {
namespace {

// Message indices within the operation's tag space (recursive_doubling.cc uses the same fold ones).
constexpr uint64_t kFoldIndex = 0;
constexpr uint64_t kHalvingIndex = 1;    // + step
constexpr uint64_t kDoublingIndex = 32;  // + step
constexpr uint64_t kUnfoldIndex = 63;

}  // namespace

void halving_doubling_allreduce(const Operation& op, void* out, size_t count, DataType dtype,
                                ReduceOp reduce_op) {
  Context& ctx = op.ctx;
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t elem = dtype_size(dtype);
  const size_t bytes = count * elem;
  char* const data = static_cast<char*>(out);
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;

  // Fold (as in recursive doubling): the even rank of each of the first rem pairs sits out.
  int virtual_rank;
  if (rank < 2 * rem) {
    if (rank % 2 == 0) {
      RequestPtr send = ctx.pair(rank + 1).isend(data, bytes, op.tag(kFoldIndex));
      op.wait(*send);
      RequestPtr recv = ctx.pair(rank + 1).irecv(data, bytes, op.tag(kUnfoldIndex));
      op.wait(*recv);
      return;  // already scaled by the partner for avg
    }
    char* incoming = static_cast<char*>(ctx.scratch(bytes));
    RequestPtr recv = ctx.pair(rank - 1).irecv(incoming, bytes, op.tag(kFoldIndex));
    op.wait(*recv);
    reduce_into(data, data, incoming, count, dtype, reduce_op);
    virtual_rank = rank / 2;
  } else {
    virtual_rank = rank - rem;
  }
  auto real_rank = [rem](int v) { return v < rem ? v * 2 + 1 : v + rem; };

  const Chunks chunks(count, p);
  auto at = [&](int chunk) { return data + chunks.offset(chunk) * elem; };
  auto span_bytes = [&](int first, int end) {
    return (chunks.offset(end) - chunks.offset(first)) * elem;
  };
  char* incoming = static_cast<char*>(ctx.scratch(span_bytes(0, p / 2 > 0 ? p / 2 : 1)));

  // Recursive halving: [first, end) is the range of chunks this rank is still responsible for.
  int first = 0, end = p;
  uint64_t step = 0;
  for (int mask = p / 2; mask >= 1; mask /= 2, ++step) {
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

  // Recursive doubling of the owned range until every rank holds all chunks.
  step = 0;
  for (int mask = 1; mask < p; mask *= 2, ++step) {
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

  if (rank < 2 * rem) {  // an odd rank of a folded pair: hand the result back
    RequestPtr send = ctx.pair(rank - 1).isend(data, bytes, op.tag(kUnfoldIndex));
    op.wait(*send);
  }
}

}  // namespace ringd::algo
