// Rank 0's test accuracy at each epoch's end of `ringd train` (the MLP with --evaluate and a test
// set; the replay model has nothing to evaluate).
#pragma once

#include <cstdint>

#include "model/dataset.h"
#include "model/model.h"
#include "runners/train_config.h"
#include "runners/train_runner.h"

namespace ringd::runners {

// Whether this run evaluates at all.
bool evaluates(const TrainConfig& config, const TrainData& data);

// The share of `test` the model classifies right (forward only, 1000 rows at a time).
double test_accuracy(model::Model& model, const model::Dataset& test);

// test_accuracy() after epoch `epoch` (from 1), ending at global step `step`, printed as
// "epoch 2 done (step 2808): test accuracy 0.9512 on 10000 samples".
EpochResult evaluate_epoch(model::Model& model, const model::Dataset& test, int64_t epoch,
                           int64_t step);

}  // namespace ringd::runners
