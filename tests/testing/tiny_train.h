// A tiny labelled data set for `ringd train` runs inside a test (tests/launcher): 64 samples of 4
// features in 2 classes, the same bytes on every run; and a config that trains a 4-3-2 MLP on it
// for a few steps, quietly.
#pragma once

#include <cstdint>

#include "runners/train_runner.h"

namespace ringd::testing {

inline runners::TrainData tiny_train_data() {
  runners::TrainData data;
  model::Dataset& train = data.train;
  train.source = "tiny";
  train.rows = 64;
  train.features = 4;
  train.classes = 2;
  for (size_t r = 0; r < train.rows; ++r) {
    for (size_t f = 0; f < 4; ++f) train.pixels.push_back(static_cast<uint8_t>((r * 7 + f) % 256));
    train.labels.push_back(static_cast<int32_t>(r % 2));
  }
  return data;
}

inline runners::TrainConfig tiny_train_config(int64_t steps) {
  runners::TrainConfig config;
  config.layers = "4,3,2";
  config.batch_size = 4;
  config.max_steps = steps;
  config.evaluate = false;
  config.log_every = int64_t{1} << 40;
  return config;
}

}  // namespace ringd::testing
