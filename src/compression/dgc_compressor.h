// One tensor's deep gradient compression on one rank (Lin et al., ICLR 2018, Algorithm 1 with
// momentum correction). Per step, for gradient g of this rank:
//
//   g <- g x min(1, clip / ||g||)       local gradient clipping (clip = clip_norm / sqrt(ranks))
//   u <- m u + g                        momentum correction: the velocity, not g, is accumulated
//   v <- v + u                          local accumulation of everything not yet sent
//   S <- the k entries of largest |v|   top-k (compression/topk_select.h), k = count (1 - s)
//   send (i, v_i) for i in S            (sparse_exchange.h adds every rank's pairs)
//   v_i <- 0, u_i <- 0 for i in S       what was sent leaves the residual; momentum factor
//                                       masking stops the stale velocity of sent entries
//
// The receivers average the pairs and apply w <- w - lr x average: plain SGD, because the
// momentum is already in u. A tensor the rule keeps dense (dgc_options.h) sends u + v whole and
// keeps its momentum (no masking): that is momentum SGD on the average, as without DGC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compression/topk_select.h"

namespace ringd::compression {

// One (index, value) pair on the wire: 8 bytes, index first, both little-endian as in memory.
struct SparseEntry {
  uint32_t index;
  float value;
};
static_assert(sizeof(SparseEntry) == 8, "SparseEntry travels as 8 bytes");

class DgcTensorState {
 public:
  DgcTensorState(size_t count, float momentum);

  // The sparse step: appends k pairs, indices offset by index_base (the tensor's place in a
  // fused buffer), in ascending index order. clip_threshold 0 = no clipping.
  // Throws kInvalidArgument when index_base + count passes 2^32 (the wire's 32-bit indices).
  void compress_sparse(const float* gradient, size_t k, float clip_threshold,
                       const TopkOptions& topk, uint64_t index_base,
                       std::vector<SparseEntry>* entries);

  // The dense step: out (count elements) = u + v, then v = 0; u keeps its momentum.
  void compress_dense(const float* gradient, float clip_threshold, float* out);

  size_t count() const { return velocity_.size(); }
  const std::vector<float>& velocity() const { return velocity_; }        // u
  const std::vector<float>& accumulated() const { return accumulated_; }  // v, the residual

 private:
  // u = m u + c g and v += u in one pass, c the clipping factor.
  void accumulate(const float* gradient, float clip_threshold);

  float momentum_;
  std::vector<float> velocity_;
  std::vector<float> accumulated_;
  std::vector<uint32_t> selected_;      // reused between steps
  std::vector<float> selected_values_;  // v at selected_
};

// velocity = momentum x velocity + scale x gradient, then accumulated += velocity, over `count`
// elements (dgc_accumulate.h), vectorised (AVX2 where the CPU has it). The dense step's
// accumulation; the sparse step fuses it with the top-k search (topk_select.h).
void accumulate_velocity(const float* gradient, float* velocity, float* accumulated, size_t count,
                         float momentum, float scale);

// The factor that brings g's L2 norm down to `threshold` (1 when it is already within, or when
// threshold is 0).
float clip_factor(const float* gradient, size_t count, float threshold);

}  // namespace ringd::compression
