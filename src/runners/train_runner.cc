#include "runners/train_runner.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <exception>
#include <memory>
#include <numbers>
#include <optional>
#include <thread>

#include "common/logging.h"
#include "common/sha256.h"
#include "common/text.h"
#include "common/tunables.h"
#include "model/allreduce_sync.h"
#include "model/checkpoint.h"
#include "model/gemm.h"
#include "model/gradient_profile.h"
#include "model/mlp.h"
#include "model/optimizer_state.h"
#include "model/replay_model.h"
#include "ringd/collectives.h"
#include "ringd/engine.h"
#include "ringd/error.h"
#include "ringd/local_group.h"
#include "runners/gpu_group.h"
#include "runners/metrics_file.h"
#include "runners/train_report.h"

namespace ringd::runners {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The job's matrix-product backend: rank 0 resolves --blas and broadcasts its choice. Every rank
// applies the same averaged gradient, so mixed backends would not split the replicas; but each
// rank's share of that gradient would round the way its own backend does, and the job's numbers
// would then depend on which nodes have a GPU. One choice for the job keeps a run reproducible.
model::GemmKind agree_on_gemm(Context& ctx, const std::string& blas) {
  int64_t kind = -1;  // -1: rank 0 could not choose
  std::exception_ptr failure;
  if (ctx.rank() == 0) {
    try {
      kind = static_cast<int64_t>(model::choose_gemm(blas));
    } catch (const Error&) {
      failure = std::current_exception();
    }
  }
  broadcast(ctx, &kind, 1, DataType::kInt64, 0);
  if (failure) std::rethrow_exception(failure);
  if (kind < 0) {
    RINGD_THROW(kUnavailable, "rank 0 could not set up --blas " << blas << " (rank 0's error says "
                                                                << "why)");
  }
  return static_cast<model::GemmKind>(kind);
}

// The model of one device; with --gpus, device `device` is GPU `device` and a cuBLAS backend
// multiplies there.
std::unique_ptr<model::Model> make_model(Context& ctx, const TrainConfig& config, int device) {
  if (config.model == "replay") {
    const auto backward = std::chrono::microseconds(std::llround(config.compute_ms * 1000));
    return std::make_unique<model::ReplayModel>(model::load_gradient_profile(config.profile),
                                                backward / 2, backward, config.spread);
  }
  const model::GemmKind kind = agree_on_gemm(ctx, config.blas);
  std::unique_ptr<model::Gemm> gemm;
  try {
    gemm = model::make_gemm(kind, config.gpus ? device : -1);
  } catch (const Error& error) {
    RINGD_THROW(kUnavailable, "rank " << ctx.rank() << ": the job multiplies through "
                                      << model::gemm_kind_name(kind) << " (rank 0's --blas "
                                      << config.blas
                                      << "), which this rank cannot use: " << error.what()
                                      << ". Pass --blas openblas to train on the CPU everywhere");
  }
  return std::make_unique<model::Mlp>(model::parse_layer_sizes(config.layers), config.seed,
                                      std::move(gemm));
}

std::string params_digest(const std::vector<model::ParameterView>& params) {
  Sha256 sha;
  for (const model::ParameterView& p : params) sha.update(p.value, p.count * sizeof(float));
  const Sha256Digest digest = sha.finish();
  return hex(digest.data(), digest.size());
}

// Where a resumed run starts.
struct ResumePoint {
  int64_t step = 0;
  std::string path;
  std::vector<std::vector<float>> momentum;  // empty: none saved
  double wall_seconds = 0;
  std::string run_id;  // rank 0: the checkpoint's run, which this run continues
};

class TrainRank {
 public:
  TrainRank(Context& ctx, const TrainConfig& config, const TrainData& data, const TrainHooks& hooks)
      : ctx_(ctx),
        config_(config),
        data_(data),
        hooks_(hooks),
        rank_(ctx.rank()),
        size_(ctx.size()),
        devices_(config.mode == SyncMode::kAllreduce ? config.local_devices : 1),
        world_(size_ * devices_),
        model_(make_model(ctx, config, 0)),
        global_batch_(config.batch_size * static_cast<size_t>(world_)) {
    for (int d = 1; d < devices_; ++d) replicas_.push_back(make_model(ctx, config, d));
    if (config_.gpus) {
      RINGD_CHECK_ARG(config_.mode == SyncMode::kAllreduce,
                      "--gpus applies to --mode allreduce only");
      group_ = make_gpu_group("train", devices_, compression_);
    } else if (devices_ > 1) {
      group_ = make_cpu_local_group(devices_);
    }
    RINGD_CHECK_ARG(!config_.group_memory || group_,
                    "group memory needs a local group (local devices > 1, or --gpus)");
    for (int d = 0; group_memory() && d < devices_; ++d) {
      group_stop_votes_.push_back(group_->allocate(d, sizeof(float)));
    }
    if (config_.model == "mlp") {
      const model::Dataset& train = data_.train;
      RINGD_CHECK_ARG(train.features == model_->input_size(),
                      "--layers " << config_.layers << " takes " << model_->input_size()
                                  << " inputs, but the images of " << train.source << " have "
                                  << train.features << " pixels; make the first layer "
                                  << train.features);
      RINGD_CHECK_ARG(train.classes <= model_->classes(),
                      train.source << " has labels up to " << train.classes - 1 << ", but --layers "
                                   << config_.layers << " ends in " << model_->classes()
                                   << " classes");
      steps_per_epoch_ = static_cast<int64_t>(train.rows / global_batch_);
      RINGD_CHECK_ARG(steps_per_epoch_ > 0, "the training set has "
                                                << train.rows << " samples, fewer than one global "
                                                << "batch of " << global_batch_ << " (--batch-size "
                                                << config_.batch_size << " x " << world_
                                                << (devices_ > 1 ? " devices)" : " ranks)"));
    } else {
      steps_per_epoch_ = config_.steps_per_epoch;
    }
    planned_steps_ = steps_per_epoch_ * config_.epochs;
    total_steps_ = planned_steps_;
    if (config_.max_steps > 0) total_steps_ = std::min(total_steps_, config_.max_steps);
  }

  TrainSummary run() {
    TrainSummary summary = describe();
    if (rank_ == 0 && !config_.checkpoint_dir.empty()) {
      model::remove_stale_temporaries(config_.checkpoint_dir);
    }
    const ResumePoint resume = config_.resume ? resume_point() : ResumePoint{};
    if (rank_ == 0) run_id_ = resume.run_id.empty() ? model::new_run_id() : resume.run_id;
    summary.start_step = resume.step;
    summary.resumed_from = resume.path;
    wall_offset_ = resume.wall_seconds;

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
      options.local_group = group_.get();
      options.hierarchy.strategy = config_.hierarchy;
      engine = std::make_unique<Engine>(ctx_, options);
      engine_ = engine.get();
      std::vector<std::vector<model::ParameterView>> replica_views;
      for (const auto& replica : replicas_) replica_views.push_back(replica->parameters());
      sync = std::make_unique<model::AllreduceSync>(*engine, sgd, std::move(replica_views),
                                                    group_memory() ? group_.get() : nullptr);
    } else {
      sync = make_ps_sync(config_.ps, config_.interface, ctx_, sgd);
    }
    const std::vector<model::ParameterView>& params = model_->parameters();
    sync->initialize(params);
    local_optimizer_ = dynamic_cast<model::LocalOptimizer*>(sync.get());
    if (!resume.momentum.empty()) {
      if (local_optimizer_) {
        for (size_t i = 0; i < params.size(); ++i) {
          local_optimizer_->optimizer().restore_state(i, resume.momentum[i]);
        }
      } else if (rank_ == 0) {
        RINGD_LOG(kWarn) << "--mode " << sync_mode_name(config_.mode)
                         << " keeps the momentum on the servers: the checkpoint's momentum is not "
                            "restored";
      }
    }
    try {
      train(*sync, resume.step, summary);
    } catch (const std::exception& e) {
      // The peers' errors carry this rank's own cause, not "the engine was shut down".
      if (engine) engine->shutdown(e.what(), /*failed=*/true);
      throw;
    }
    summary.params_sha256 = params_digest(params);
    if (hooks_.at_end && summary.stopped_by_signal == 0) hooks_.at_end(rank_, params);
    sync.reset();
    engine_ = nullptr;
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
    s.model = model_->describe();
    if (const auto* mlp = dynamic_cast<const model::Mlp*>(model_.get()))
      s.blas = mlp->gemm().name();
    s.transport = ctx_.transport_name();
    s.compression = compression_name(compression_);
    s.ranks = size_;
    s.local_devices = devices_;
    if (group_) s.local_group = group_->kind();
    s.global_batch = global_batch_;
    s.learning_rate = learning_rate_at(config_, world_, config_.warmup_steps, planned_steps_);
    s.lr_schedule = lr_schedule_name(config_.lr_schedule);
    s.steps_per_epoch = steps_per_epoch_;
    return s;
  }

  model::CheckpointMeta checkpoint_meta(int64_t step) const {
    model::CheckpointMeta meta;
    meta.model = model_->describe();
    meta.step = step;
    meta.epoch = step / steps_per_epoch_;
    meta.step_in_epoch = step % steps_per_epoch_;
    meta.seed = config_.seed;
    meta.global_batch = static_cast<int64_t>(global_batch_);
    meta.world_size = world_;
    meta.learning_rate = config_.learning_rate;
    meta.momentum = config_.momentum;
    meta.weight_decay = config_.weight_decay;
    meta.run_id = run_id_;
    return meta;
  }

  // Rank 0 checks a checkpoint against this run; a mismatch would silently train something else.
  void check_compatible(const model::Checkpoint& checkpoint) const {
    const model::CheckpointMeta& meta = checkpoint.meta;
    const model::CheckpointMeta want = checkpoint_meta(0);
    if (meta.model != want.model || meta.global_batch != want.global_batch ||
        meta.seed != want.seed) {
      RINGD_THROW(kInvalidArgument,
                  "checkpoint " << checkpoint.path << " was written by a run with model "
                                << meta.model << ", global batch " << meta.global_batch
                                << " and seed " << meta.seed << "; this run has " << want.model
                                << ", " << want.global_batch << " and " << want.seed
                                << ". Resume with the same --layers/--profile, --batch-size x "
                                   "ranks and --seed, or use another --checkpoint-dir");
    }
    const auto& params = model_->parameters();
    RINGD_CHECK_ARG(checkpoint.parameters.size() == params.size(),
                    "checkpoint " << checkpoint.path << " holds " << checkpoint.parameters.size()
                                  << " tensors, the model has " << params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      const model::CheckpointTensor& t = checkpoint.parameters[i];
      RINGD_CHECK_ARG(t.name == params[i].name && t.values.size() == params[i].count,
                      "checkpoint " << checkpoint.path << ": tensor " << i << " is " << t.name
                                    << " (" << t.values.size() << " values), the model's is "
                                    << params[i].name << " (" << params[i].count << ")");
    }
  }

  // Rank 0 reads the newest intact checkpoint and loads its parameters; every rank learns the
  // step and receives the momentum (rank 0's file system may be the only one that has it).
  ResumePoint resume_point() {
    RINGD_CHECK_ARG(!config_.checkpoint_dir.empty(), "--resume needs --checkpoint-dir");
    ResumePoint point;
    int64_t meta[3] = {0, 0, 0};  // status (0 none, 1 found, -1 failed), step, has momentum
    std::exception_ptr failure;
    std::optional<model::Checkpoint> checkpoint;
    if (rank_ == 0) {
      try {
        checkpoint = model::load_latest_checkpoint(config_.checkpoint_dir);
        if (checkpoint) {
          check_compatible(*checkpoint);
          const auto& params = model_->parameters();
          for (size_t i = 0; i < params.size(); ++i) {
            std::copy(checkpoint->parameters[i].values.begin(),
                      checkpoint->parameters[i].values.end(), params[i].value);
          }
          meta[0] = 1;
          meta[1] = checkpoint->meta.step;
          meta[2] = checkpoint->momentum.empty() ? 0 : 1;
          point.path = checkpoint->path;
          point.wall_seconds = checkpoint->meta.wall_seconds;
          point.run_id = checkpoint->meta.run_id;
        }
      } catch (const Error&) {
        failure = std::current_exception();
        meta[0] = -1;
      }
    }
    broadcast(ctx_, meta, 3, DataType::kInt64, 0);
    if (meta[0] < 0) {
      if (failure) std::rethrow_exception(failure);
      RINGD_THROW(kInvalidArgument, "rank 0 could not resume from --checkpoint-dir "
                                        << config_.checkpoint_dir << " (rank 0's error says why)");
    }
    if (meta[0] == 0) {
      if (rank_ == 0) {
        std::printf("no checkpoint in %s: starting at step 0\n", config_.checkpoint_dir.c_str());
        std::fflush(stdout);
      }
      return point;
    }
    point.step = meta[1];
    if (meta[2] == 1) {
      const auto& params = model_->parameters();
      point.momentum.resize(params.size());
      for (size_t i = 0; i < params.size(); ++i) {
        if (rank_ == 0) {
          point.momentum[i] = std::move(checkpoint->momentum[i]);
        } else {
          point.momentum[i].assign(params[i].count, 0.0f);
        }
        broadcast(ctx_, point.momentum[i].data(), params[i].count, DataType::kFloat32, 0);
      }
    }
    if (rank_ == 0) {
      std::printf("resuming from %s at step %lld\n", point.path.c_str(),
                  static_cast<long long>(point.step));
      std::fflush(stdout);
    }
    return point;
  }

  void train(model::ParameterSync& sync, int64_t first_step, TrainSummary& summary) {
    const std::vector<model::ParameterView>& params = model_->parameters();
    // Per device: its share of the global batch (global rank = rank x devices + device).
    std::vector<std::vector<float>> inputs(static_cast<size_t>(devices_));
    std::vector<std::vector<int32_t>> labels(static_cast<size_t>(devices_));
    std::vector<model::Batch> batches(static_cast<size_t>(devices_));
    std::vector<uint32_t> order;
    int64_t order_epoch = -1;
    ProgressInterval interval;
    int64_t steps_run = 0;
    double step_seconds = 0;
    int64_t last_checkpoint = -1;
    const double blocked_before = sync.blocked_seconds();
    // Rank 0 reports to its pod's agent (RINGD_METRICS_FILE), at most once a second.
    const std::string& metrics_path = tunables().metrics_file;
    double gradient_bytes_per_step = 0;
    for (const model::ParameterView& view : params) {
      gradient_bytes_per_step += static_cast<double>(view.count * sizeof(float));
    }
    auto last_metrics = Clock::now();
    int64_t completed = first_step;  // steps whose update every parameter holds
    int stop = 0;
    try {
      for (int64_t step = first_step; step < total_steps_; ++step) {
        const int64_t epoch = step / steps_per_epoch_;
        if (config_.model == "mlp") {
          if (epoch != order_epoch) {
            order = model::epoch_order(data_.train.rows, config_.seed, epoch);
            order_epoch = epoch;
          }
          for (int d = 0; d < devices_; ++d) {
            batches[d] =
                model::assemble_batch(data_.train, order, step % steps_per_epoch_, global_batch_,
                                      rank_ * devices_ + d, world_, &inputs[d], &labels[d]);
          }
        }
        if (engine_) engine_->set_epoch(static_cast<int>(epoch));  // DGC's warm-up reads it
        const model::StepInfo info{step, learning_rate_at(config_, world_, step, planned_steps_)};
        const double blocked_start = sync.blocked_seconds();
        const auto start = Clock::now();
        const model::ForwardResult result = forward_on_every_device(batches);
        bool first_gradient = true;
        model_->backward([&](size_t index) {
          // The stop vote goes in with the step's first gradient (fused with it where it can be).
          if (first_gradient) submit_stop_vote();
          first_gradient = false;
          sync.gradient_ready(index, info);
        });
        sync.finish_step(info);
        completed = step + 1;
        stop = stop_vote_result();
        const double seconds = seconds_since(start);
        step_seconds += seconds;
        ++steps_run;
        interval.add(result, config_.batch_size * static_cast<size_t>(devices_), seconds,
                     sync.blocked_seconds() - blocked_start);
        if (hooks_.after_step) hooks_.after_step(rank_, step, params);
        if (config_.throttle_ms > 0) {
          std::this_thread::sleep_for(
              std::chrono::duration<double, std::milli>(config_.throttle_ms));
        }
        const int64_t done = step + 1;
        const bool epoch_end = done % steps_per_epoch_ == 0;
        if (rank_ == 0 && !metrics_path.empty() &&
            (done == total_steps_ || seconds_since(last_metrics) >= 1.0)) {
          TrainMetrics metrics;
          metrics.mode = sync_mode_name(config_.mode);
          metrics.ranks = world_;
          metrics.steps = steps_run;
          metrics.last_step_seconds = seconds;
          metrics.samples_total =
              static_cast<double>(steps_run) * static_cast<double>(global_batch_);
          metrics.gradient_bytes_total = static_cast<double>(steps_run) * gradient_bytes_per_step;
          metrics.communication_ratio = (sync.blocked_seconds() - blocked_before) / step_seconds;
          if (engine_) metrics.rank_lag_seconds = engine_->stats().rank_lag_s;
          publish_metrics(metrics_path, train_metrics_text(metrics));
          last_metrics = Clock::now();
        }
        if (rank_ == 0 && (done % config_.log_every == 0 || done == total_steps_)) {
          ProgressLine line;
          line.epoch = epoch + 1;
          line.epochs = (total_steps_ + steps_per_epoch_ - 1) / steps_per_epoch_;
          line.step = done;
          line.steps = total_steps_;
          line.global_batch = global_batch_;
          line.eta_seconds = (step_seconds / static_cast<double>(steps_run)) *
                             static_cast<double>(total_steps_ - done);
          line.replay = config_.model == "replay";
          line.gradient_bytes_per_step = gradient_bytes_per_step;
          print_progress(line, interval);
          summary.last_loss = interval.mean_loss();
          summary.last_accuracy = interval.accuracy();
          interval = ProgressInterval{};
        }
        if (rank_ == 0 && (epoch_end || done == total_steps_) && evaluates()) {
          const double accuracy = test_accuracy();
          summary.epochs.push_back(EpochResult{epoch + 1, done, accuracy});
          summary.test_accuracy = accuracy;
          std::printf("epoch %lld done (step %lld): test accuracy %.4f on %zu samples\n",
                      static_cast<long long>(epoch + 1), static_cast<long long>(done), accuracy,
                      data_.test.rows);
          std::fflush(stdout);
        }
        const bool periodic = config_.checkpoint_every > 0 && done % config_.checkpoint_every == 0;
        if (rank_ == 0 && !config_.checkpoint_dir.empty() && (periodic || done == total_steps_)) {
          if (done == total_steps_) {
            last_checkpoint = done;  // a failure is the run's error, not retried on the way out
            summary.checkpoint = save_checkpoint(done, step_seconds);  // the result: must be kept
          } else {
            try {
              summary.checkpoint = save_checkpoint(done, step_seconds);
            } catch (const Error& error) {
              // The run itself is fine, and the next checkpoint may well be written: say so loudly
              // and go on (the final checkpoint's failure does end the run).
              ++summary.checkpoint_failures;
              RINGD_LOG(kWarn) << "step " << done
                               << ": the periodic checkpoint was not written, training goes on "
                                  "(the next one is due at step "
                               << std::min(done + config_.checkpoint_every, total_steps_)
                               << "): " << error.what();
            }
          }
          last_checkpoint = done;
        }
        if (stop != 0) {
          if (rank_ == 0) {
            std::printf("stopping after step %lld of %lld: %s\n", static_cast<long long>(done),
                        static_cast<long long>(total_steps_),
                        local_stop_ != 0 ? ("signal " + signal_name(stop) + " here").c_str()
                                         : "another rank was asked to stop");
            std::fflush(stdout);
          }
          if (rank_ == 0 && !config_.checkpoint_dir.empty() && last_checkpoint != done) {
            summary.checkpoint = save_checkpoint(done, step_seconds);
            last_checkpoint = done;
          }
          break;
        }
      }
    } catch (const std::exception&) {
      if (rank_ == 0 && config_.mode == SyncMode::kAllreduce && !config_.checkpoint_dir.empty() &&
          completed > first_step && completed != last_checkpoint) {
        // The failed step applied nothing (AllreduceSync updates once every gradient arrived):
        // the parameters and momentum are those after step `completed`, on every rank alike.
        std::printf("step %lld failed: writing a checkpoint of step %lld before exiting\n",
                    static_cast<long long>(completed + 1), static_cast<long long>(completed));
        std::fflush(stdout);
        try {
          save_checkpoint(completed, step_seconds);
        } catch (const std::exception& error) {
          RINGD_LOG(kWarn) << "could not write a checkpoint after the failure: " << error.what();
        }
      }
      throw;
    }
    summary.stopped_by_signal = stop;
    if (rank_ == 0 && !config_.checkpoint_dir.empty() && last_checkpoint < 0 &&
        first_step >= total_steps_) {
      // Resumed from a checkpoint of the final step: that file is the final checkpoint.
      summary.checkpoint = summary.resumed_from;
    }
    summary.steps = stop != 0 ? completed : std::max(first_step, total_steps_);
    summary.train_seconds = step_seconds;
    summary.blocked_seconds = sync.blocked_seconds() - blocked_before;
    if (step_seconds > 0) {
      summary.samples_per_second =
          static_cast<double>(steps_run) * static_cast<double>(global_batch_) / step_seconds;
      summary.comm_share = summary.blocked_seconds / step_seconds;
    }
  }

  // The engine sees the gradients in memory the group allocated (--gpus; tests over CPU devices).
  bool group_memory() const { return group_ && (config_.gpus || config_.group_memory); }

  // Forward on every device's batch, and backward on devices 1..L-1, whose gradients are whole
  // before device 0's backward starts (the caller runs it, handing each gradient to the sync as
  // it finishes, so that communication overlaps it). The replay model's replicas model no compute
  // of their own: devices run in parallel, so the node's step takes device 0's time. Returns the
  // mean loss and the hits over every device's batch.
  model::ForwardResult forward_on_every_device(const std::vector<model::Batch>& batches) {
    model::ForwardResult total;
    if (config_.model == "mlp") {
      for (size_t d = 1; d < batches.size(); ++d) {
        const model::ForwardResult result = replicas_[d - 1]->forward(batches[d]);
        replicas_[d - 1]->backward([](size_t) {});
        total.loss += result.loss;
        total.correct += result.correct;
      }
    }
    const model::ForwardResult result = model_->forward(batches[0]);
    total.loss = (total.loss + result.loss) / static_cast<double>(devices_);
    total.correct += result.correct;
    return total;
  }

  bool evaluates() const {
    return config_.model == "mlp" && config_.evaluate && data_.test.rows > 0;
  }

  double test_accuracy() {
    constexpr size_t kChunk = 1000;
    std::vector<float> inputs;
    std::vector<int32_t> labels;
    size_t correct = 0;
    for (size_t first = 0; first < data_.test.rows; first += kChunk) {
      const size_t count = std::min(kChunk, data_.test.rows - first);
      correct +=
          model_->forward(model::assemble_rows(data_.test, first, count, &inputs, &labels)).correct;
    }
    return static_cast<double>(correct) / static_cast<double>(data_.test.rows);
  }

  // The stop vote (TrainHooks::stop_requested): in allreduce mode an average of every rank's
  // signal number through the engine, so that all ranks stop after the same step; in
  // parameter-server mode (no engine, and async workers keep no common step) the local request.
  void submit_stop_vote() {
    if (!hooks_.stop_requested) return;
    local_stop_ = hooks_.stop_requested(rank_);
    if (!engine_) return;
    stop_votes_.assign(static_cast<size_t>(devices_), static_cast<float>(local_stop_));
    std::vector<void*> votes;  // where the engine sees each device's vote
    for (int d = 0; d < devices_; ++d) {
      if (group_memory()) {
        group_->upload({group_stop_votes_[d].get(), d}, &stop_votes_[d], sizeof(float));
        votes.push_back(group_stop_votes_[d].get());
      } else {
        votes.push_back(&stop_votes_[d]);
      }
    }
    Submission vote;
    vote.name = "ringd.stop";
    vote.tensor = Tensor{votes[0], DataType::kFloat32, {1}};
    vote.other_devices.assign(votes.begin() + 1, votes.end());
    vote.op = ReduceOp::kAvg;
    vote.compression = Compression::kNone;
    stop_handle_ = engine_->submit(std::move(vote));
  }

  // After finish_step: 0 to go on, else the signal to report (this rank's, or SIGTERM's).
  int stop_vote_result() {
    if (!hooks_.stop_requested) return 0;
    if (!engine_) return local_stop_;
    stop_handle_.wait();
    stop_handle_ = Handle();
    if (group_memory()) {
      group_->download(&stop_votes_[0], {group_stop_votes_[0].get(), 0}, sizeof(float));
    }
    if (local_stop_ != 0) return local_stop_;
    return stop_votes_[0] > 0 ? SIGTERM : 0;
  }

  static std::string signal_name(int number) {
    if (number == SIGTERM) return "15 (SIGTERM)";
    if (number == SIGINT) return "2 (SIGINT)";
    return std::to_string(number);
  }

  std::string save_checkpoint(int64_t step, double step_seconds) {
    const auto start = Clock::now();
    model::CheckpointMeta meta = checkpoint_meta(step);
    meta.wall_seconds = wall_offset_ + step_seconds;
    const auto& params = model_->parameters();
    std::vector<const float*> momentum;
    if (local_optimizer_) {
      for (size_t i = 0; i < params.size(); ++i) {
        momentum.push_back(local_optimizer_->optimizer().state(i).data());
      }
    }
    const std::string path =
        model::write_checkpoint(config_.checkpoint_dir, meta, params, momentum);
    if (!pruner_) pruner_.emplace(config_.checkpoint_dir, run_id_, config_.keep_checkpoints);
    pruner_->prune(step);
    std::printf("checkpoint step %lld -> %s (%.3f s)\n", static_cast<long long>(step), path.c_str(),
                seconds_since(start));
    std::fflush(stdout);
    return path;
  }

  Context& ctx_;
  const TrainConfig& config_;
  const TrainData& data_;
  const TrainHooks& hooks_;
  const int rank_;
  const int size_;
  const int devices_;  // --local-devices (allreduce mode), else 1
  const int world_;    // size_ x devices_: what the global batch and the learning rate scale with
  std::unique_ptr<model::Model> model_;                  // device 0's
  std::vector<std::unique_ptr<model::Model>> replicas_;  // devices 1..devices_-1
  std::unique_ptr<LocalGroup> group_;                    // with devices_ > 1 or --gpus
  const size_t global_batch_;
  int64_t steps_per_epoch_ = 0;
  int64_t planned_steps_ = 0;  // epochs x steps per epoch: the lr schedule's length
  int64_t total_steps_ = 0;    // planned_steps_ cut by --max-steps
  double wall_offset_ = 0;
  model::LocalOptimizer* local_optimizer_ = nullptr;
  // Allreduce mode: --compression, else RINGD_COMPRESSION; the engine while run() has one.
  const Compression compression_ =
      config_.mode == SyncMode::kAllreduce
          ? config_.compression.value_or(parse_compression(tunables().compression))
          : Compression::kNone;
  Engine* engine_ = nullptr;
  std::string run_id_;             // rank 0: written into every checkpoint
  int local_stop_ = 0;             // this step's TrainHooks::stop_requested()
  std::vector<float> stop_votes_;  // one per device: the engine averages them in place
  std::vector<std::shared_ptr<void>>
      group_stop_votes_;  // group_memory(): the votes the engine sees
  Handle stop_handle_;
  std::optional<model::CheckpointPruner> pruner_;  // rank 0: deletes this run's older files
};

}  // namespace

const char* sync_mode_name(SyncMode mode) { return mode == SyncMode::kPs ? "ps" : "allreduce"; }

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
  if (config.model != "mlp") return data;
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
