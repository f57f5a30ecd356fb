#include "runners/train_checkpoints.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>

#include "common/logging.h"
#include "ringd/collectives.h"
#include "ringd/error.h"

namespace ringd::runners {
namespace {

// Rank 0 checks a checkpoint against this run; a mismatch would silently train something else.
void check_compatible(const model::Checkpoint& checkpoint, const model::CheckpointMeta& want,
                      const model::Model& model) {
  const model::CheckpointMeta& meta = checkpoint.meta;
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
  const auto& params = model.parameters();
  RINGD_CHECK_ARG(checkpoint.parameters.size() == params.size(),
                  "checkpoint " << checkpoint.path << " holds " << checkpoint.parameters.size()
                                << " tensors, the model has " << params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const model::CheckpointTensor& t = checkpoint.parameters[i];
    RINGD_CHECK_ARG(t.name == params[i].name && t.values.size() == params[i].count,
                    "checkpoint " << checkpoint.path << ": tensor " << i << " is " << t.name << " ("
                                  << t.values.size() << " values), the model's is "
                                  << params[i].name << " (" << params[i].count << ")");
  }
}

}  // namespace

model::CheckpointMeta checkpoint_meta(const TrainConfig& config, const TrainShape& shape,
                                      const model::Model& model, int64_t step,
                                      const std::string& run_id) {
  model::CheckpointMeta meta;
  meta.model = model.describe();
  meta.step = step;
  meta.epoch = step / shape.steps_per_epoch;
  meta.step_in_epoch = step % shape.steps_per_epoch;
  meta.seed = config.seed;
  meta.global_batch = static_cast<int64_t>(shape.global_batch);
  meta.world_size = shape.world;
  meta.learning_rate = config.learning_rate;
  meta.momentum = config.momentum;
  meta.weight_decay = config.weight_decay;
  meta.run_id = run_id;
  return meta;
}

ResumePoint resume_point(Context& ctx, const TrainConfig& config, const TrainShape& shape,
                         model::Model& model) {
  RINGD_CHECK_ARG(!config.checkpoint_dir.empty(), "--resume needs --checkpoint-dir");
  const int rank = ctx.rank();
  ResumePoint point;
  int64_t meta[3] = {0, 0, 0};  // status (0 none, 1 found, -1 failed), step, has momentum
  std::exception_ptr failure;
  std::optional<model::Checkpoint> checkpoint;
  if (rank == 0) {
    try {
      checkpoint = model::load_latest_checkpoint(config.checkpoint_dir);
      if (checkpoint) {
        check_compatible(*checkpoint, checkpoint_meta(config, shape, model, 0, ""), model);
        const auto& params = model.parameters();
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
  broadcast(ctx, meta, 3, DataType::kInt64, 0);
  if (meta[0] < 0) {
    if (failure) std::rethrow_exception(failure);
    RINGD_THROW(kInvalidArgument, "rank 0 could not resume from --checkpoint-dir "
                                      << config.checkpoint_dir << " (rank 0's error says why)");
  }
  if (meta[0] == 0) {
    if (rank == 0) {
      std::printf("no checkpoint in %s: starting at step 0\n", config.checkpoint_dir.c_str());
      std::fflush(stdout);
    }
    return point;
  }
  point.step = meta[1];
  if (meta[2] == 1) {
    const auto& params = model.parameters();
    point.momentum.resize(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      if (rank == 0) {
        point.momentum[i] = std::move(checkpoint->momentum[i]);
      } else {
        point.momentum[i].assign(params[i].count, 0.0f);
      }
      broadcast(ctx, point.momentum[i].data(), params[i].count, DataType::kFloat32, 0);
    }
  }
  if (rank == 0) {
    std::printf("resuming from %s at step %lld\n", point.path.c_str(),
                static_cast<long long>(point.step));
    std::fflush(stdout);
  }
  return point;
}

CheckpointPolicy::CheckpointPolicy(const TrainConfig& config, const TrainShape& shape,
                                   const model::Model& model, int rank, std::string run_id,
                                   double wall_offset)
    : config_(config),
      shape_(shape),
      model_(model),
      rank_(rank),
      run_id_(std::move(run_id)),
      wall_offset_(wall_offset) {}

void CheckpointPolicy::after_step(int64_t done, double step_seconds, TrainSummary& summary) {
  const bool last = done == shape_.total_steps;
  const bool periodic = config_.checkpoint_every > 0 && done % config_.checkpoint_every == 0;
  if (!writes() || !(periodic || last)) return;
  if (last) {
    last_ = done;  // a failure is the run's error, not retried on the way out
    summary.checkpoint = save(done, step_seconds);  // the result: must be kept
    return;
  }
  try {
    summary.checkpoint = save(done, step_seconds);
  } catch (const Error& error) {
    // The run itself is fine, and the next checkpoint may well be written: say so loudly and go
    // on (the final checkpoint's failure does end the run).
    ++summary.checkpoint_failures;
    RINGD_LOG(kWarn) << "step " << done
                     << ": the periodic checkpoint was not written, training goes on (the next "
                        "one is due at step "
                     << std::min(done + config_.checkpoint_every, shape_.total_steps)
                     << "): " << error.what();
  }
  last_ = done;
}

void CheckpointPolicy::after_stop(int64_t done, double step_seconds, TrainSummary& summary) {
  if (!writes() || last_ == done) return;
  summary.checkpoint = save(done, step_seconds);
  last_ = done;
}

void CheckpointPolicy::after_failure(int64_t completed, int64_t first_step, double step_seconds) {
  if (!writes() || config_.mode != SyncMode::kAllreduce || completed <= first_step ||
      completed == last_) {
    return;
  }
  // The failed step applied nothing (AllreduceSync updates once every gradient arrived): the
  // parameters and momentum are those after step `completed`, on every rank alike.
  std::printf("step %lld failed: writing a checkpoint of step %lld before exiting\n",
              static_cast<long long>(completed + 1), static_cast<long long>(completed));
  std::fflush(stdout);
  try {
    save(completed, step_seconds);
  } catch (const std::exception& error) {
    RINGD_LOG(kWarn) << "could not write a checkpoint after the failure: " << error.what();
  }
}

void CheckpointPolicy::at_end(int64_t first_step, TrainSummary& summary) const {
  if (writes() && last_ < 0 && first_step >= shape_.total_steps) {
    summary.checkpoint = summary.resumed_from;
  }
}

std::string CheckpointPolicy::save(int64_t step, double step_seconds) {
  const auto start = std::chrono::steady_clock::now();
  model::CheckpointMeta meta = checkpoint_meta(config_, shape_, model_, step, run_id_);
  meta.wall_seconds = wall_offset_ + step_seconds;
  const auto& params = model_.parameters();
  std::vector<const float*> momentum;
  if (optimizer_) {
    for (size_t i = 0; i < params.size(); ++i) momentum.push_back(optimizer_->state(i).data());
  }
  const std::string path = model::write_checkpoint(config_.checkpoint_dir, meta, params, momentum);
  if (!pruner_) pruner_.emplace(config_.checkpoint_dir, run_id_, config_.keep_checkpoints);
  pruner_->prune(step);
  std::printf("checkpoint step %lld -> %s (%.3f s)\n", static_cast<long long>(step), path.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  std::fflush(stdout);
  return path;
}

}  // namespace ringd::runners
