// The --check data: inputs that depend on rank and element index, and the result every rank must
// see, in closed form. Values are small integers, exactly representable in every dtype, and sums
// stay within the exactly representable range (bf16: 256, f16: 2048, f32: 2^24, uint8: 254), so
// the expected result is exact whatever order the ranks combined in. Only avg is inexact (it
// divides by the number of ranks) and is compared with a tolerance of a few ulps.
//
//   w(i) = i mod k,  k = min(13, (limit - 7) / n + 1),  v(i) = i mod 7,  owner(i) = i mod n
//   sum, avg:  in(r, i) = w + [r == owner] (1 + v)          ->  n w + 1 + v  (avg: that / n)
//   min, max:  in(r, i) = w + v + [r != owner]              ->  w + v;  max: w + v + 1 (n >= 2)
//   prod:      in(r, i) = r == owner ? 1 + i mod 13 + v : 1  ->  1 + i mod 13 + v
//   broadcast, allgather (no reduction):  in(r, i) = (5 r + i) mod 13
#pragma once

#include <cstddef>
#include <cstdint>

#include "ringd/types.h"
#include "runners/bench_config.h"

namespace ringd::runners {

struct CheckShape {
  Collective collective;
  DataType dtype;
  ReduceOp op;
  int ranks;
  int root;               // broadcast
  size_t count_per_rank;  // allgather/reducescatter: elements per rank; else elements
};

// Fills this rank's input buffer (allgather: count_per_rank elements; reducescatter:
// ranks*count_per_rank; allreduce/broadcast: count_per_rank). Broadcast fills only on the root.
void fill_check_input(const CheckShape& shape, int rank, void* input);

// Elements of `output` that differ from the expected result on `rank` (allgather:
// ranks*count_per_rank elements; others count_per_rank).
int64_t count_wrong(const CheckShape& shape, int rank, const void* output);

// Bytes that no check value can equal (an all-ones pattern: NaN for floats), written into outputs
// before the checked run so a collective that never writes is caught.
void fill_sentinel(void* buffer, size_t bytes);

// The single values behind the buffers (exposed for unit tests).
double check_input_value(const CheckShape& shape, int rank, size_t index);
double check_expected_value(const CheckShape& shape, int rank, size_t index);

}  // namespace ringd::runners
