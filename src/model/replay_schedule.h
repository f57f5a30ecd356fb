// The replay model's backward pass: when each gradient becomes ready. Gradients come in reverse
// registration order (the last layer's first), each after its share of the modeled compute time:
//
//   compute ------------------------------------------------------------> compute_time
//   uniform:  g[n-1]   g[n-2]   g[n-3]   ...   g[1]   g[0]      every tensor an equal share
//   by size:  g[n-1]        g[n-2] g[n-3]  ...      g[1] g[0]    shares proportional to elements
//
// The compute is modeled (the caller sleeps until each time): GPU time does not use the CPU.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "model/gradient_profile.h"

namespace ringd::model {

enum class ComputeSpread { kUniform, kBySize };
const char* compute_spread_name(ComputeSpread spread);  // "uniform", "size"
ComputeSpread parse_compute_spread(const std::string& text);

struct Emission {
  size_t tensor;                 // index in profile.tensors
  std::chrono::microseconds at;  // since the start of the backward pass
};

// One emission per tensor, in emission order; the last is at `compute` exactly.
std::vector<Emission> backward_schedule(const GradientProfile& profile,
                                        std::chrono::microseconds compute, ComputeSpread spread);

}  // namespace ringd::model
