#include "runners/train_evaluation.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace ringd::runners {

bool evaluates(const TrainConfig& config, const TrainData& data) {
  return config.model == ModelKind::kMlp && config.evaluate && data.test.rows > 0;
}

double test_accuracy(model::Model& model, const model::Dataset& test) {
  constexpr size_t kChunk = 1000;
  std::vector<float> inputs;
  std::vector<int32_t> labels;
  size_t correct = 0;
  for (size_t first = 0; first < test.rows; first += kChunk) {
    const size_t count = std::min(kChunk, test.rows - first);
    correct += model.forward(model::assemble_rows(test, first, count, &inputs, &labels)).correct;
  }
  return static_cast<double>(correct) / static_cast<double>(test.rows);
}

EpochResult evaluate_epoch(model::Model& model, const model::Dataset& test, int64_t epoch,
                           int64_t step) {
  const double accuracy = test_accuracy(model, test);
  std::printf("epoch %lld done (step %lld): test accuracy %.4f on %zu samples\n",
              static_cast<long long>(epoch), static_cast<long long>(step), accuracy, test.rows);
  std::fflush(stdout);
  return EpochResult{epoch, step, accuracy};
}

}  // namespace ringd::runners
