// Deep gradient compression's sparsity warm-up and the dense-or-sparse rule (Lin et al., "Deep
// Gradient Compression", ICLR 2018); the settings are in include/ringd/dgc.h. The four parts of
// the algorithm live in dgc_compressor.h, the exchange of what it selects in sparse_exchange.h.
#pragma once

#include <cstddef>

#include "ringd/dgc.h"

namespace ringd::compression {

// The sparsity in force during `epoch` (0-based).
double sparsity_at(const DgcOptions& options, int epoch);

// How many entries a tensor of `count` elements sends at `sparsity`: at least 1 (for count > 0).
size_t kept_entries(size_t count, double sparsity);

// The dense-or-sparse rule, the same on every rank because it reads only shared numbers. Sparse
// costs 8 bytes (uint32 index + float value) per kept entry, and each rank receives every other
// rank's: (ranks - 1) x k x 8 bytes. The dense ring allreduce moves 2 (ranks - 1) / ranks x
// count x 4 bytes per rank. Sparse is chosen when it moves fewer bytes, i.e. k < count / ranks,
// and the tensor has at least min_sparse_elements.
bool sends_sparse(const DgcOptions& options, size_t count, int ranks, double sparsity);

// Throws kInvalidArgument naming the field for settings no rank could run (sparsity outside
// [0, 1), momentum outside [0, 1), a negative clip norm, a sample fraction outside (0, 1]).
void check_dgc_options(const DgcOptions& options);

}  // namespace ringd::compression
