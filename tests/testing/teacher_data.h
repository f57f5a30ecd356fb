// A labelled data set for `ringd train` runs inside a test: 16-pixel images whose label (of 4) a
// fixed random linear "teacher" decides, the same bytes on every run. The teacher is drawn first,
// then the training rows, then the test rows, from one seeded stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/random.h"
#include "runners/train_runner.h"

namespace ringd::testing {

// test_rows == 0: the test set is a copy of the training set.
inline runners::TrainData teacher_data(size_t train_rows, size_t test_rows = 0,
                                       uint64_t seed = 2024) {
  model::SplitMix64 random(seed);
  std::vector<double> teacher(16 * 4);
  for (double& w : teacher) w = random.uniform() - 0.5;
  runners::TrainData data;
  for (model::Dataset* set : {&data.train, &data.test}) {
    const size_t rows = set == &data.train ? train_rows : test_rows;
    set->source = set == &data.train ? "synthetic" : "synthetic test";
    set->rows = rows;
    set->features = 16;
    set->classes = 4;
    for (size_t r = 0; r < rows; ++r) {
      double best = -1e9;
      int label = 0;
      std::vector<uint8_t> pixels(16);
      for (uint8_t& p : pixels) p = static_cast<uint8_t>(random.below(256));
      for (int c = 0; c < 4; ++c) {
        double score = 0;
        for (int f = 0; f < 16; ++f) score += teacher[c * 16 + f] * pixels[f];
        if (score > best) best = score, label = c;
      }
      set->pixels.insert(set->pixels.end(), pixels.begin(), pixels.end());
      set->labels.push_back(label);
    }
  }
  if (test_rows == 0) data.test = data.train;
  return data;
}

}  // namespace ringd::testing
