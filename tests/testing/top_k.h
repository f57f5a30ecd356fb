// For the DGC tests: seeded normal values (a gradient), and the exact top k by a full sort, the
// reference the selection and the compressor are checked against.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace ringd::testing {

// `count` values of N(0, 1); the same seed gives the same values.
inline std::vector<float> normal_values(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = normal(rng);
  return values;
}

// The positions of the k largest |values| (ties to the lower index), ascending.
inline std::vector<uint32_t> brute_force_top_k(const std::vector<float>& values, size_t k) {
  std::vector<uint32_t> order(values.size());
  std::iota(order.begin(), order.end(), uint32_t{0});
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const float abs_a = std::fabs(values[a]), abs_b = std::fabs(values[b]);
    return abs_a != abs_b ? abs_a > abs_b : a < b;
  });
  order.resize(std::min(k, order.size()));
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace ringd::testing
