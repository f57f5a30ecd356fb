// What rank 0 of `ringd train` reports while it trains: the progress line every --log-every steps
// (train_report.h's format), with --tensorboard the same figures as TensorBoard scalars at each
// line and the test accuracy after each epoch (tensorboard_writer.h), and, with
// RINGD_METRICS_FILE, its pod agent's metrics at most once a second and after the last step.
// Other ranks report nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "model/model.h"
#include "ringd/engine.h"
#include "runners/tensorboard_writer.h"
#include "runners/train_config.h"
#include "runners/train_report.h"
#include "runners/train_step.h"

namespace ringd::runners {

class TrainProgress {
 public:
  // `blocked_before`: the sync's blocked seconds when the run's first step starts. On rank 0 with
  // --tensorboard, creates the event file (throws kIo when it cannot).
  TrainProgress(const TrainConfig& config, const TrainShape& shape, int rank,
                double gradient_bytes_per_step, double blocked_before);

  // After every step, once the step's hooks ran. `blocked_now`: the sync's blocked seconds after
  // the step, `blocked_step` this step's part of them. Updates the summary's last loss and
  // accuracy whenever a progress line is printed.
  void after_step(int64_t step, const model::ForwardResult& result, double seconds,
                  double blocked_now, double blocked_step, const Engine* engine,
                  TrainSummary& summary);

  // Rank 0, after an epoch's evaluation at global step `step`: "test/accuracy" with --tensorboard.
  void epoch_evaluated(int64_t step, double test_accuracy);

  int64_t steps_run() const { return steps_run_; }
  double step_seconds() const { return step_seconds_; }  // time in steps, this run

 private:
  void publish(double seconds, double blocked_now, const Engine* engine);
  void write_scalars(int64_t step);

  const TrainConfig& config_;
  const TrainShape shape_;
  const int rank_;
  const double gradient_bytes_per_step_;
  const double blocked_before_;
  const std::string metrics_path_;                  // RINGD_METRICS_FILE (rank 0)
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // --tensorboard, rank 0 only
  ProgressInterval interval_;
  int64_t steps_run_ = 0;
  double step_seconds_ = 0;
  std::chrono::steady_clock::time_point last_metrics_;
};

}  // namespace ringd::runners
