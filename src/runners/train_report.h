// What `ringd train` prints: the progress line (rank 0, every --log-every steps), the closing
// summary, and the --json summary.
//
//   epoch 1/3  step 150/1404  loss 0.6213  acc 0.781  samples/s 10240  comm 21%  ETA 0:37
//
// loss and acc are the means over rank 0's batches since the previous line; samples/s counts the
// global batch (every rank) per second of step time; comm is the share of the step time spent
// blocked waiting for the gradient exchange (what backward did not hide).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"
#include "runners/train_runner.h"

namespace ringd::runners {

class ProgressInterval {
 public:
  void add(const model::ForwardResult& result, size_t rows, double step_seconds,
           double blocked_seconds) {
    loss_sum_ += result.loss * static_cast<double>(rows);
    correct_ += result.correct;
    rows_ += rows;
    steps_ += 1;
    seconds_ += step_seconds;
    blocked_ += blocked_seconds;
  }
  double mean_loss() const { return rows_ ? loss_sum_ / static_cast<double>(rows_) : 0; }
  double accuracy() const {
    return rows_ ? static_cast<double>(correct_) / static_cast<double>(rows_) : 0;
  }
  int64_t steps() const { return steps_; }
  double seconds() const { return seconds_; }
  // The progress line's samples/s: the global batch (every rank) of each step per second.
  double samples_per_second(size_t global_batch) const {
    return seconds_ > 0 ? static_cast<double>(steps_) * static_cast<double>(global_batch) / seconds_
                        : 0;
  }
  double comm_share() const { return seconds_ > 0 ? blocked_ / seconds_ : 0; }

 private:
  double loss_sum_ = 0;
  size_t correct_ = 0;
  size_t rows_ = 0;
  int64_t steps_ = 0;
  double seconds_ = 0;
  double blocked_ = 0;
};

struct ProgressLine {
  int64_t epoch = 0;  // from 1
  int64_t epochs = 0;
  int64_t step = 0;  // completed
  int64_t steps = 0;
  size_t global_batch = 0;
  double eta_seconds = 0;
  // The replay model has no loss or accuracy: its line shows the mean step time and the gradient
  // bytes per step and per second (each rank's, through the allreduce or the servers) instead.
  bool replay = false;
  double gradient_bytes_per_step = 0;
};

std::string format_progress(const ProgressLine& line, const ProgressInterval& interval);
void print_progress(const ProgressLine& line, const ProgressInterval& interval);

// "1:05", "12:00:09".
std::string format_duration(double seconds);

// The closing lines (rank 0).
std::string format_train_summary(const TrainSummary& summary);

// TrainSummary::params_sha256: SHA-256 (hex) of every parameter's bytes, registration order.
std::string params_digest(const std::vector<model::ParameterView>& params);
// One JSON object (the --json file).
std::string format_train_json(const TrainSummary& summary);

}  // namespace ringd::runners
