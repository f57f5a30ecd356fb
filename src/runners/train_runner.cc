#include "runners/train_runner.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <memory>
#include <numbers>
#include <thread>

#include "common/logging.h"
#include "common/tunables.h"
#include "model/allreduce_sync.h"
#include "model/checkpoint.h"
#include "ringd/engine.h"
#include "runners/train_checkpoints.h"
#include "runners/train_evaluation.h"
#include "runners/train_progress.h"
#include "runners/train_report.h"
#include "runners/train_step.h"

namespace ringd::runners {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string signal_name(int number) {
  if (number == SIGTERM) return "15 (SIGTERM)";
  if (number == SIGINT) return "2 (SIGINT)";
  return std::to_string(number);
}

// One rank's run: the step (train_step.h), the reports (train_progress.h), the evaluation
// (train_evaluation.h) and the checkpoints and resume (train_checkpoints.h), in that order after
// every step.
class TrainRank {
 public:
  TrainRank(Context& ctx, const TrainConfig& config, const TrainData& data, const TrainHooks& hooks)
      : ctx_(ctx),
        config_(config),
        data_(data),
        hooks_(hooks),
        rank_(ctx.rank()),
        compression_(config.mode == SyncMode::kAllreduce
                         ? config.compression.value_or(parse_compression(tunables().compression))
                         : Compression::kNone),
        step_(ctx, config, data, compression_),
        shape_(step_.shape()) {}

  TrainSummary run() {
    TrainSummary summary = describe();
    if (rank_ == 0 && !config_.checkpoint_dir.empty()) {
      model::remove_stale_temporaries(config_.checkpoint_dir);
    }
    const ResumePoint resume =
        config_.resume ? resume_point(ctx_, config_, shape_, step_.model()) : ResumePoint{};
    std::string run_id;  // rank 0: written into every checkpoint
    if (rank_ == 0) run_id = resume.run_id.empty() ? model::new_run_id() : resume.run_id;
    summary.start_step = resume.step;
    summary.resumed_from = resume.path;
    CheckpointPolicy checkpoints(config_, shape_, step_.model(), rank_, run_id,
                                 resume.wall_seconds);

    model::SgdOptions sgd{config_.momentum, config_.weight_decay};
    std::unique_ptr<Engine> engine;
    std::unique_ptr<model::ParameterSync> sync;
    if (config_.mode == SyncMode::kAllreduce) {
      EngineOptions options;
      options.cycle_time_ms = config_.cycle_time_ms;
      options.fusion_threshold_bytes = config_.fusion_threshold_bytes;
      options.compression = compression_;
      if (compression_ == Compression::kDgc) {
        // Momentum correction: the compressor keeps the velocity, the optimizer runs plain SGD.
        options.dgc.momentum = static_cast<float>(config_.momentum);
        options.dgc.sparsity = config_.dgc_sparsity;
        options.dgc.warmup = dgc_warmup_schedule(config_.dgc_warmup_epochs, config_.dgc_sparsity);
        sgd.momentum = 0;
        if (resume.step > 0 && rank_ == 0) {
          RINGD_LOG(kWarn) << "--compression dgc: checkpoints hold no compressor state; the "
                              "residuals and velocities start from zero at step "
                           << resume.step;
        }
      }
      options.local_group = step_.group();
      options.hierarchy.strategy = config_.hierarchy;
      engine = std::make_unique<Engine>(ctx_, options);
      sync = std::make_unique<model::AllreduceSync>(*engine, sgd, step_.replica_parameters(),
                                                    step_.group_memory() ? step_.group() : nullptr);
    } else {
      sync = make_ps_sync(config_.ps, config_.interface, ctx_, sgd);
    }
    const std::vector<model::ParameterView>& params = step_.model().parameters();
    sync->initialize(params);
    model::Sgd* optimizer = sync->local_optimizer();
    checkpoints.set_optimizer(optimizer);
    if (!resume.momentum.empty()) {
      if (optimizer) {
        for (size_t i = 0; i < params.size(); ++i) {
          optimizer->restore_state(i, resume.momentum[i]);
        }
      } else if (rank_ == 0) {
        RINGD_LOG(kWarn) << "--mode " << sync_mode_name(config_.mode)
                         << " keeps the momentum on the servers: the checkpoint's momentum is not "
                            "restored";
      }
    }
    step_.set_engine(engine.get());
    try {
      train(*sync, engine.get(), checkpoints, resume.step, summary);
    } catch (const std::exception& e) {
      // The peers' errors carry this rank's own cause, not "the engine was shut down".
      if (engine) engine->shutdown(e.what(), /*failed=*/true);
      throw;
    }
    summary.params_sha256 = params_digest(params);
    if (hooks_.at_end && summary.stopped_by_signal == 0) hooks_.at_end(rank_, params);
    sync.reset();
    step_.set_engine(nullptr);
    if (engine) {
      engine->shutdown(summary.stopped_by_signal != 0
                           ? "it was stopped by signal " + std::to_string(summary.stopped_by_signal)
                           : "it finished training");
    }
    return summary;
  }

 private:
  TrainSummary describe() const {
    TrainSummary s;
    s.mode = sync_mode_name(config_.mode);
    s.model = step_.model().describe();
    s.blas = step_.model().backend();
    s.transport = ctx_.transport_name();
    s.compression = compression_name(compression_);
    s.ranks = ctx_.size();
    s.local_devices = shape_.devices;
    if (step_.group()) s.local_group = step_.group()->kind();
    s.global_batch = shape_.global_batch;
    s.learning_rate =
        learning_rate_at(config_, shape_.world, config_.warmup_steps, shape_.planned_steps);
    s.lr_schedule = lr_schedule_name(config_.lr_schedule);
    s.steps_per_epoch = shape_.steps_per_epoch;
    return s;
  }

  void train(model::ParameterSync& sync, const Engine* engine, CheckpointPolicy& checkpoints,
             int64_t first_step, TrainSummary& summary) {
    const std::vector<model::ParameterView>& params = step_.model().parameters();
    const double blocked_before = sync.blocked_seconds();
    TrainProgress progress(config_, shape_, rank_, step_.gradient_bytes_per_step(), blocked_before);
    int64_t completed = first_step;  // steps whose update every parameter holds
    int stop = 0;
    try {
      for (int64_t step = first_step; step < shape_.total_steps; ++step) {
        const model::StepInfo info{
            step, learning_rate_at(config_, shape_.world, step, shape_.planned_steps)};
        const double blocked_start = sync.blocked_seconds();
        const auto start = Clock::now();
        const model::ForwardResult result = step_.run(sync, step, info, hooks_.stop_requested);
        completed = step + 1;
        stop = step_.stop();
        const double seconds = seconds_since(start);
        const double blocked_now = sync.blocked_seconds();
        if (hooks_.after_step) hooks_.after_step(rank_, step, params);
        if (config_.throttle_ms > 0) {
          std::this_thread::sleep_for(
              std::chrono::duration<double, std::milli>(config_.throttle_ms));
        }
        const int64_t done = step + 1;
        progress.after_step(step, result, seconds, blocked_now, blocked_now - blocked_start, engine,
                            summary);
        if (rank_ == 0 && (done % shape_.steps_per_epoch == 0 || done == shape_.total_steps) &&
            evaluates(config_, data_)) {
          summary.epochs.push_back(
              evaluate_epoch(step_.model(), data_.test, step / shape_.steps_per_epoch + 1, done));
          summary.test_accuracy = summary.epochs.back().test_accuracy;
          progress.epoch_evaluated(done, summary.test_accuracy);
        }
        checkpoints.after_step(done, progress.step_seconds(), summary);
        if (stop != 0) {
          if (rank_ == 0) {
            std::printf("stopping after step %lld of %lld: %s\n", static_cast<long long>(done),
                        static_cast<long long>(shape_.total_steps),
                        step_.stopped_here() ? ("signal " + signal_name(stop) + " here").c_str()
                                             : "another rank was asked to stop");
            std::fflush(stdout);
          }
          checkpoints.after_stop(done, progress.step_seconds(), summary);
          break;
        }
      }
    } catch (const std::exception&) {
      checkpoints.after_failure(completed, first_step, progress.step_seconds());
      throw;
    }
    summary.stopped_by_signal = stop;
    checkpoints.at_end(first_step, summary);
    summary.steps = stop != 0 ? completed : std::max(first_step, shape_.total_steps);
    summary.train_seconds = progress.step_seconds();
    summary.blocked_seconds = sync.blocked_seconds() - blocked_before;
    if (progress.step_seconds() > 0) {
      summary.samples_per_second = static_cast<double>(progress.steps_run()) *
                                   static_cast<double>(shape_.global_batch) /
                                   progress.step_seconds();
      summary.comm_share = summary.blocked_seconds / progress.step_seconds();
    }
  }

  Context& ctx_;
  const TrainConfig& config_;
  const TrainData& data_;
  const TrainHooks& hooks_;
  const int rank_;
  // Allreduce mode: --compression, else RINGD_COMPRESSION.
  const Compression compression_;
  TrainStep step_;
  const TrainShape& shape_;
};

}  // namespace

const char* sync_mode_name(SyncMode mode) { return mode == SyncMode::kPs ? "ps" : "allreduce"; }

const char* model_kind_name(ModelKind kind) {
  return kind == ModelKind::kReplay ? "replay" : "mlp";
}

double learning_rate_at(const TrainConfig& config, int world_size, int64_t step,
                        int64_t planned_steps) {
  const double scaled =
      config.learning_rate * (config.lr_scaling == LrScaling::kLinear ? world_size : 1);
  const int64_t warmup = std::max<int64_t>(config.warmup_steps, 0);
  if (step < warmup) {
    return scaled * static_cast<double>(step + 1) / static_cast<double>(warmup);
  }
  if (config.lr_schedule == LrSchedule::kCosine && planned_steps > warmup) {
    const double progress = std::min(
        1.0, static_cast<double>(step - warmup) / static_cast<double>(planned_steps - warmup));
    return scaled * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  }
  return scaled;
}

const char* lr_schedule_name(LrSchedule schedule) {
  return schedule == LrSchedule::kCosine ? "cosine" : "constant";
}

TrainData load_train_data(const TrainConfig& config, bool with_test) {
  TrainData data;
  if (config.model != ModelKind::kMlp) return data;
  const std::string dir = config.data_dir.empty() ? model::kDefaultDataDir : config.data_dir;
  data.train = model::load_idx_dataset(dir, "train", config.train_limit);
  if (with_test && config.evaluate)
    data.test = model::load_idx_dataset(dir, "t10k", config.test_limit);
  return data;
}

TrainSummary run_train_rank(Context& ctx, const TrainConfig& config, const TrainData& data,
                            const TrainHooks& hooks) {
  return TrainRank(ctx, config, data, hooks).run();
}

}  // namespace ringd::runners
