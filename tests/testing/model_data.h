// Seeded random inputs for the model tests (tests/model, tests/device): a labelled batch and a
// padded row-major matrix. The same seed gives the same values on every run and machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/model.h"
#include "model/random.h"

namespace ringd::testing {

// Features uniform in [0, 1), labels uniform in [0, classes); owns what batch() points to.
struct LabelledData {
  std::vector<float> inputs;
  std::vector<int32_t> labels;
  model::Batch batch() const {
    return model::Batch{inputs.data(), labels.data(), labels.size(), inputs.size() / labels.size()};
  }
};

inline LabelledData random_labelled_data(size_t rows, size_t features, size_t classes,
                                         uint64_t seed) {
  model::SplitMix64 random(seed);
  LabelledData data;
  for (size_t i = 0; i < rows * features; ++i) {
    data.inputs.push_back(static_cast<float>(random.uniform()));
  }
  for (size_t r = 0; r < rows; ++r) {
    data.labels.push_back(static_cast<int32_t>(random.below(classes)));
  }
  return data;
}

// Fills every element past a row's end of random_matrix(): a backend that writes there is caught.
constexpr float kMatrixPadding = -12345.0f;

// A rows x columns row-major matrix with row stride `stride` (>= columns), values uniform in
// [-1, 1), the padding kMatrixPadding.
inline std::vector<float> random_matrix(size_t rows, size_t columns, size_t stride, uint64_t seed) {
  model::SplitMix64 random(seed);
  std::vector<float> m(rows * stride, kMatrixPadding);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < columns; ++c) {
      m[r * stride + c] = static_cast<float>(2 * random.uniform() - 1);
    }
  }
  return m;
}

}  // namespace ringd::testing
