// Top-k selection for deep gradient compression (Lin et al., "Deep Gradient Compression", ICLR
// 2018): each step a worker sends only the k entries of its accumulated gradient with the largest
// magnitude, as (index, value) pairs, and keeps everything else in its residual for later steps.
//
// The order is by magnitude, ties to the lower index. Magnitudes compare as the float's bits with
// the sign cleared, so the order is total: -0 ties +0, +Inf ties -Inf, and NaN (any sign) ranks
// above Inf, NaNs among themselves by payload. A NaN is thus always sent rather than hidden in the
// residual, where it would poison every later step unseen.
//
// The result is always the exact top k; the sample only decides how fast it is found (see the
// block comment in topk_select.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringd::compression {

struct TopkOptions {
  // Share of the elements read (strided, at least 1024 of them) to estimate the threshold, in
  // (0, 1]. 0.0005 measured fastest at 25 M elements, 99.9 % and 99 % sparsity, against 0.0002,
  // 0.001, 0.003 and 0.01 (bench/dgc_select_bench.cc): a smaller sample leaves more candidates,
  // a larger one costs a TLB miss per sampled page.
  double sample_fraction = 0.0005;
  // The sample's first position derives from it: the same input and seed give the same work.
  uint64_t seed = 0;
};

// What one call did, for tests and benchmarks.
struct TopkStats {
  size_t sample_size = 0;       // elements read by the sample
  size_t candidates = 0;        // elements at or above the last threshold scanned for
  int scan_rounds = 0;          // full passes of the candidate scan (1 unless it had to rescan)
  bool exact_fallback = false;  // true when the selection ran over a copy of every magnitude
};

// Writes to *indices, ascending, the positions of the k elements of largest magnitude: exactly k
// when k < count, all of 0..count-1 otherwise. Throws kInvalidArgument when count exceeds 2^32
// (indices are uint32_t), values or indices is null where needed, or sample_fraction is outside
// (0, 1]. Reads values only; never sorts the whole tensor. Usually one pass over values; a rescan
// when the sample overestimated the threshold; an exact selection over a copy of every magnitude
// (4 bytes per element) when k > ~count / 4, when the sample is all zeros, or after 3 passes.
void select_top_k(const float* values, size_t count, size_t k, const TopkOptions& options,
                  std::vector<uint32_t>* indices, TopkStats* stats = nullptr);

// select_top_k, and packed[i] = values[indices[i]] taken from the candidates the selection already
// holds rather than by a second gather over the tensor.
void select_and_pack_top_k(const float* values, size_t count, size_t k, const TopkOptions& options,
                           std::vector<uint32_t>* indices, std::vector<float>* packed,
                           TopkStats* stats = nullptr);

// DGC's accumulation and selection in one pass (dgc_compressor.h): velocity = momentum x velocity
// + scale x gradient and accumulated += velocity, element by element (dgc_accumulate.h: the same
// bits as the separate accumulation), written back; then *indices and *packed are what
// select_and_pack_top_k would give for the new `accumulated`. The threshold is estimated from a
// sample of the new values computed ahead, and the candidates are collected while the pass
// writes, so the tensor is read once instead of twice. When the estimate finds fewer than k
// candidates, select_and_pack_top_k runs over the written result (the second read it saves
// otherwise).
void accumulate_select_and_pack_top_k(const float* gradient, float* velocity, float* accumulated,
                                      size_t count, float momentum, float scale, size_t k,
                                      const TopkOptions& options, std::vector<uint32_t>* indices,
                                      std::vector<float>* packed, TopkStats* stats = nullptr);

// packed[i] = values[indices[i]]: the value half of the (index, value) pairs the exchange sends.
// Throws kInvalidArgument if an index is not below count.
void pack_selected(const float* values, size_t count, const std::vector<uint32_t>& indices,
                   std::vector<float>* packed);

// pack_selected, then values[indices[i]] = 0: the residual keeps only what was not sent.
void pack_and_zero_selected(float* values, size_t count, const std::vector<uint32_t>& indices,
                            std::vector<float>* packed);

// Where the sample reads: positions first + j * stride for j < size, all below count.
struct TopkSamplePlan {
  size_t first = 0;
  size_t stride = 1;
  size_t size = 0;
};
// Exposed so tests can build tensors that fool the estimate and force a rescan.
TopkSamplePlan plan_topk_sample(size_t count, const TopkOptions& options);

}  // namespace ringd::compression
