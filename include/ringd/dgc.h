// Deep gradient compression's settings (Compression::kDgc; Lin et al., "Deep Gradient
// Compression", ICLR 2018). Each rank sends only the largest (1 - sparsity) share of every
// float32 allreduce tensor's accumulated velocity, as (index, value) pairs, and keeps the rest for
// later steps. The momentum lives in the compressor (momentum correction), so an optimizer used
// with DGC must run plain SGD: `ringd train --compression dgc` moves --momentum there itself.
// docs/architecture.md ("Deep gradient compression") has the algorithm and the rules.
#pragma once

#include <cstddef>
#include <vector>

namespace ringd {

struct DgcOptions {
  // Share of each tensor's entries NOT sent once the warm-up is over (k = count x (1 - sparsity)).
  double sparsity = 0.999;
  // Sparsity in the first epochs: epoch e < size() uses warmup[e] (the paper's exponential ramp,
  // 75% -> 93.75% -> 98.4375% -> 99.6%, then `sparsity`). Empty: no warm-up. The engine learns the
  // epoch from Engine::set_epoch().
  std::vector<double> warmup = {0.75, 0.9375, 0.984375, 0.996};
  // The momentum of momentum correction (the optimizer's own must then be 0).
  float momentum = 0.9f;
  // Local gradient clipping: each rank scales a tensor's gradient down to an L2 norm of at most
  // clip_norm / sqrt(ranks) before accumulating it (the paper's N^-1/2 rule). 0 = off.
  float clip_norm = 0.0f;
  // Share of elements sampled to estimate the top-k threshold; the selection is exact anyway.
  double sample_fraction = 0.0005;
  // Tensors with fewer elements stay dense whatever the byte rule says: one more latency-bound
  // exchange costs more than the bytes it saves (biases, norms).
  size_t min_sparse_elements = 4096;

  bool operator==(const DgcOptions&) const = default;
};

// The paper's warm-up over `epochs` epochs: each one sends a quarter of the share the one before
// did (75%, 93.75%, 98.4375%, 99.6%, ...), never sparser than `sparsity`. 0 epochs: empty.
std::vector<double> dgc_warmup_schedule(int epochs, double sparsity);

}  // namespace ringd
