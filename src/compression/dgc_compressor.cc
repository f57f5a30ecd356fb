#include "compression/dgc_compressor.h"

#include <cmath>
#include <limits>

#include "common/target_clones.h"
#include "compression/dgc_accumulate.h"
#include "ringd/error.h"

namespace ringd::compression {

// GCC at -O2 vectorises the fixed 16-element inner loop; a plain loop over `count` stays scalar
// there (its cheap cost model does not vectorise a loop of unknown trip count).
RINGD_AVX2_CLONES void accumulate_velocity(const float* __restrict gradient,
                                           float* __restrict velocity,
                                           float* __restrict accumulated, size_t count,
                                           float momentum, float scale) {
  constexpr size_t kBlock = 16;
  const size_t blocks = count / kBlock * kBlock;
  for (size_t base = 0; base < blocks; base += kBlock) {
    for (size_t j = 0; j < kBlock; ++j) {
      accumulate_element(gradient[base + j], momentum, scale, velocity[base + j],
                         accumulated[base + j]);
    }
  }
  for (size_t i = blocks; i < count; ++i) {
    accumulate_element(gradient[i], momentum, scale, velocity[i], accumulated[i]);
  }
}

float clip_factor(const float* gradient, size_t count, float threshold) {
  if (threshold <= 0.0f) return 1.0f;
  double squares = 0.0;
  for (size_t i = 0; i < count; ++i) squares += static_cast<double>(gradient[i]) * gradient[i];
  const double norm = std::sqrt(squares);
  return norm > threshold ? static_cast<float>(threshold / norm) : 1.0f;
}

DgcTensorState::DgcTensorState(size_t count, float momentum)
    : momentum_(momentum), velocity_(count, 0.0f), accumulated_(count, 0.0f) {}

void DgcTensorState::accumulate(const float* gradient, float clip_threshold) {
  const size_t count = velocity_.size();
  accumulate_velocity(gradient, velocity_.data(), accumulated_.data(), count, momentum_,
                      clip_factor(gradient, count, clip_threshold));
}

void DgcTensorState::compress_sparse(const float* gradient, size_t k, float clip_threshold,
                                     const TopkOptions& topk, uint64_t index_base,
                                     std::vector<SparseEntry>* entries) {
  RINGD_CHECK_ARG(
      index_base <= uint64_t{std::numeric_limits<uint32_t>::max()} + 1 &&
          index_base + accumulated_.size() <= uint64_t{std::numeric_limits<uint32_t>::max()} + 1,
      "dgc: a tensor of " << accumulated_.size() << " elements at offset " << index_base
                          << " does not fit 32-bit indices");
  // The accumulation and the top-k search share one pass over the tensor.
  accumulate_select_and_pack_top_k(gradient, velocity_.data(), accumulated_.data(),
                                   accumulated_.size(), momentum_,
                                   clip_factor(gradient, accumulated_.size(), clip_threshold), k,
                                   topk, &selected_, &selected_values_);
  entries->reserve(entries->size() + selected_.size());
  for (size_t e = 0; e < selected_.size(); ++e) {
    const uint32_t index = selected_[e];
    entries->push_back({static_cast<uint32_t>(index_base + index), selected_values_[e]});
    accumulated_[index] = 0.0f;
    velocity_[index] = 0.0f;
  }
}

void DgcTensorState::compress_dense(const float* gradient, float clip_threshold, float* out) {
  accumulate(gradient, clip_threshold);
  for (size_t i = 0; i < accumulated_.size(); ++i) {
    out[i] = accumulated_[i];
    accumulated_[i] = 0.0f;
  }
}

}  // namespace ringd::compression
