// Collective operations over a Context. Every rank of the context must call the same collective,
// with the same count, dtype, op and root, in the same order; otherwise ranks fail with kMismatch
// or kTimeout (never a wrong result reported as success). Results are bitwise identical on every
// rank.
//
// In place: pass the same pointer as `in` and `out` (for allgather: in == out + rank*count;
// for reduce_scatter: out == in + rank*count_per_rank).
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <vector>

#include "ringd/transport.h"
#include "ringd/types.h"

namespace ringd {

enum class AllreduceAlgorithm {
  kAuto,               // by payload size: recursive doubling, halving-doubling, ring
  kRing,               // bandwidth-optimal: reduce-scatter + allgather, pipelined in segments
  kRecursiveDoubling,  // latency-optimal: log2(n) exchange rounds (plus a fold for non-powers of 2)
  kHalvingDoubling,    // Rabenseifner: the ring's volume in 2 log2(n) steps (mid sizes)
};

const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm);
AllreduceAlgorithm parse_allreduce_algorithm(const char* text);

// Zero / kAuto fields take their value from the RINGD_* tunables (common/tunables.h).
struct CollectiveOptions {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  size_t segment_bytes = 0;       // pipeline segment size
  size_t segments_in_flight = 0;  // receives posted ahead
  // kAuto: recursive doubling up to small_allreduce_bytes (payload bytes), halving-doubling up to
  // ring_allreduce_bytes, the ring above. 0 = the tunable's value (unless *_set: then literally 0).
  size_t small_allreduce_bytes = 0;
  bool small_threshold_set = false;
  size_t ring_allreduce_bytes = 0;
  bool ring_threshold_set = false;
  std::chrono::milliseconds timeout{0};  // per blocking wait; 0 = context's timeout
};

// out = op over ranks of in; `count` elements of `dtype` on every rank.
void allreduce(Context& ctx, const void* in, void* out, size_t count, DataType dtype, ReduceOp op,
               const CollectiveOptions& options = {});

// One of the buffers of allreduce_list.
struct BufferView {
  void* data = nullptr;
  size_t count = 0;  // elements
};

// In place, over several buffers as if they were one laid end to end, without copying them
// together: afterwards each buffer holds op over every rank's same buffer, bitwise what one
// allreduce of the concatenation gives. Every rank passes the same counts in the same order (a
// different total fails with kMismatch). The ring runs on the buffers themselves (its messages
// stop at each buffer's end); below the ring's size class (RINGD_RING_ALLREDUCE_BYTES) the buffers
// are copied into one and allreduced there, as latency-bound sizes should. The fusion engine runs
// its uncompressed buckets this way.
void allreduce_list(Context& ctx, std::span<const BufferView> buffers, DataType dtype, ReduceOp op,
                    const CollectiveOptions& options = {});

// Copies root's buffer to every rank (pipelined chain). `buf` is input on root, output elsewhere.
void broadcast(Context& ctx, void* buf, size_t count, DataType dtype, int root,
               const CollectiveOptions& options = {});

// out[r*count .. (r+1)*count) = in of rank r.
void allgather(Context& ctx, const void* in, void* out, size_t count_per_rank, DataType dtype,
               const CollectiveOptions& options = {});

// Variable-size allgather (MPI_Allgatherv): rank r contributes counts[r] elements, and `out`
// receives every rank's in turn (rank r's at offset counts[0] + ... + counts[r-1]). Every rank
// passes the same `counts` (ranks that disagree fail with kMismatch) and its own counts[rank]
// elements in `in`; in place: in == out + that offset. A ring pass, like allgather.
void allgatherv(Context& ctx, const void* in, void* out, const std::vector<size_t>& counts,
                DataType dtype, const CollectiveOptions& options = {});

// out (count_per_rank elements) = op over ranks of in[rank*count_per_rank ..]; `in` holds
// size*count_per_rank elements.
void reduce_scatter(Context& ctx, const void* in, void* out, size_t count_per_rank, DataType dtype,
                    ReduceOp op, const CollectiveOptions& options = {});

}  // namespace ringd
