// The exchange of deep gradient compression's (index, value) pairs: every rank's pairs reach
// every rank (one allgatherv of 8-byte entries, ringd/collectives.h), and each rank adds them into
// a dense buffer in one fixed order, rank 0's pairs first, so every replica ends bitwise
// identical:
//
//   rank 0 sends {(2, a)}     allgatherv      every rank: out = 0
//   rank 1 sends {(2, b)}    ---------->      out[2] += a; out[2] += b; out[5] += c
//   rank 2 sends {(5, c)}                     (an average adds a/3, b/3, c/3 instead)
//
// For the same sparsified gradients this equals their dense allreduce up to the order of the
// additions (exactly, where the values add without rounding and 1/ranks is a power of two).
#pragma once

#include <cstddef>
#include <vector>

#include "compression/dgc_compressor.h"
#include "ringd/collectives.h"

namespace ringd::compression {

// Consecutive pieces of the index space: index i lands in the slice that holds position i of the
// slices laid end to end (a fused bucket's tensors).
struct DenseSlice {
  float* data;
  size_t count;
};

// outs = the sum over ranks of their entries (each value x 1 / size when average); every entry's
// index must be below the slices' total. entry_counts[r] = how many entries rank r sends, the same
// vector on every rank (DGC computes it by rule: dgc_options.h). A received index at or beyond the
// total fails with kProtocol naming the sending rank.
void sparse_allreduce(Context& ctx, const std::vector<SparseEntry>& mine,
                      const std::vector<size_t>& entry_counts, const std::vector<DenseSlice>& outs,
                      bool average, const CollectiveOptions& options = {});

// The same into one buffer of `count` elements.
void sparse_allreduce(Context& ctx, const std::vector<SparseEntry>& mine,
                      const std::vector<size_t>& entry_counts, float* out, size_t count,
                      bool average, const CollectiveOptions& options = {});

}  // namespace ringd::compression
