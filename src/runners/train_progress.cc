#include "runners/train_progress.h"

#include "common/tunables.h"
#include "runners/metrics_file.h"

namespace ringd::runners {

TrainProgress::TrainProgress(const TrainConfig& config, const TrainShape& shape, int rank,
                             double gradient_bytes_per_step, double blocked_before)
    : config_(config),
      shape_(shape),
      rank_(rank),
      gradient_bytes_per_step_(gradient_bytes_per_step),
      blocked_before_(blocked_before),
      metrics_path_(tunables().metrics_file),
      last_metrics_(std::chrono::steady_clock::now()) {
  if (rank_ == 0 && !config_.tensorboard_dir.empty()) {
    tensorboard_ = std::make_unique<TensorBoardWriter>(config_.tensorboard_dir);
  }
}

void TrainProgress::after_step(int64_t step, const model::ForwardResult& result, double seconds,
                               double blocked_now, double blocked_step, const Engine* engine,
                               TrainSummary& summary) {
  step_seconds_ += seconds;
  ++steps_run_;
  interval_.add(result, config_.batch_size * static_cast<size_t>(shape_.devices), seconds,
                blocked_step);
  if (rank_ != 0) return;
  const int64_t done = step + 1;
  // The clock is read only where a metrics file is asked for (most runs have none).
  if (!metrics_path_.empty() &&
      (done == shape_.total_steps ||
       std::chrono::steady_clock::now() - last_metrics_ >= std::chrono::seconds(1))) {
    publish(seconds, blocked_now, engine);
  }
  if (done % config_.log_every == 0 || done == shape_.total_steps) {
    ProgressLine line;
    line.epoch = step / shape_.steps_per_epoch + 1;
    line.epochs = (shape_.total_steps + shape_.steps_per_epoch - 1) / shape_.steps_per_epoch;
    line.step = done;
    line.steps = shape_.total_steps;
    line.global_batch = shape_.global_batch;
    line.eta_seconds = (step_seconds_ / static_cast<double>(steps_run_)) *
                       static_cast<double>(shape_.total_steps - done);
    line.replay = config_.model == ModelKind::kReplay;
    line.gradient_bytes_per_step = gradient_bytes_per_step_;
    print_progress(line, interval_);
    if (tensorboard_) write_scalars(done);  // before the interval starts anew
    summary.last_loss = interval_.mean_loss();
    summary.last_accuracy = interval_.accuracy();
    interval_ = ProgressInterval{};
  }
}

void TrainProgress::epoch_evaluated(int64_t step, double test_accuracy) {
  if (!tensorboard_) return;
  tensorboard_->scalar("test/accuracy", step, test_accuracy);
  tensorboard_->flush();
}

void TrainProgress::write_scalars(int64_t step) {
  // The replay model has no loss or accuracy (its progress line shows neither).
  if (config_.model != ModelKind::kReplay) {
    tensorboard_->scalar("train/loss", step, interval_.mean_loss());
    tensorboard_->scalar("train/accuracy", step, interval_.accuracy());
  }
  tensorboard_->scalar("train/samples_per_s", step,
                       interval_.samples_per_second(shape_.global_batch));
  tensorboard_->scalar("train/communication_ratio", step, interval_.comm_share());
  tensorboard_->flush();
}

void TrainProgress::publish(double seconds, double blocked_now, const Engine* engine) {
  TrainMetrics metrics;
  metrics.mode = sync_mode_name(config_.mode);
  metrics.ranks = shape_.world;
  metrics.steps = steps_run_;
  metrics.last_step_seconds = seconds;
  metrics.samples_total =
      static_cast<double>(steps_run_) * static_cast<double>(shape_.global_batch);
  metrics.gradient_bytes_total = static_cast<double>(steps_run_) * gradient_bytes_per_step_;
  metrics.communication_ratio = (blocked_now - blocked_before_) / step_seconds_;
  if (engine) metrics.rank_lag_seconds = engine->stats().rank_lag_s;
  publish_metrics(metrics_path_, train_metrics_text(metrics));
  last_metrics_ = std::chrono::steady_clock::now();
}

}  // namespace ringd::runners
