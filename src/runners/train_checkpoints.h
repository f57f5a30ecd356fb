// Rank 0's checkpoints of `ringd train` (with --checkpoint-dir), and where a resumed run starts.
//
//   every --checkpoint-every steps   written, or warned about: training goes on
//   after the last step              written, or the run fails (it is the run's result)
//   after the step all ranks stop at (a stop request), unless that step was just written
//   when a step fails (allreduce mode) the last step that completed, whose parameters and momentum
//                                    every rank still holds untouched
// Each write prunes this run's older files to --keep-checkpoints (model/checkpoint.h).
//
// --resume: rank 0 reads the newest intact checkpoint, checks it was written by a run of the same
// model, global batch and seed, and loads its parameters; every rank learns the step and receives
// the momentum (rank 0's file system may be the only one that has it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "ringd/transport.h"
#include "runners/train_config.h"
#include "runners/train_runner.h"
#include "runners/train_step.h"

namespace ringd::runners {

// What a checkpoint of global step `step` of this run records besides the tensors.
model::CheckpointMeta checkpoint_meta(const TrainConfig& config, const TrainShape& shape,
                                      const model::Model& model, int64_t step,
                                      const std::string& run_id);

// Where a resumed run starts.
struct ResumePoint {
  int64_t step = 0;
  std::string path;
  std::vector<std::vector<float>> momentum;  // empty: none saved
  double wall_seconds = 0;
  std::string run_id;  // rank 0: the checkpoint's run, which this run continues
};

// Every rank, collectively (see above); a ResumePoint at step 0 when there is no checkpoint.
ResumePoint resume_point(Context& ctx, const TrainConfig& config, const TrainShape& shape,
                         model::Model& model);

class CheckpointPolicy {
 public:
  // Writes only on rank 0 with --checkpoint-dir. `wall_offset`: the resumed checkpoint's training
  // seconds, which the new ones continue.
  CheckpointPolicy(const TrainConfig& config, const TrainShape& shape, const model::Model& model,
                   int rank, std::string run_id, double wall_offset);

  // The optimizer whose momentum the checkpoints hold (null: parameters only).
  void set_optimizer(const model::Sgd* optimizer) { optimizer_ = optimizer; }

  // After global step `done` (counted from 1) completed; `step_seconds`: time in steps this run.
  void after_step(int64_t done, double step_seconds, TrainSummary& summary);
  // After the step every rank stopped at.
  void after_stop(int64_t done, double step_seconds, TrainSummary& summary);
  // A step failed after `completed` steps (this run started at `first_step`); never throws.
  void after_failure(int64_t completed, int64_t first_step, double step_seconds);
  // At the end: a run resumed from a checkpoint of its final step has that file as its final one.
  void at_end(int64_t first_step, TrainSummary& summary) const;

 private:
  bool writes() const { return rank_ == 0 && !config_.checkpoint_dir.empty(); }
  std::string save(int64_t step, double step_seconds);

  const TrainConfig& config_;
  const TrainShape shape_;
  const model::Model& model_;
  const int rank_;
  const std::string run_id_;
  const double wall_offset_;
  const model::Sgd* optimizer_ = nullptr;
  int64_t last_ = -1;                              // the step last written (-1: none)
  std::optional<model::CheckpointPruner> pruner_;  // deletes this run's older files
};

}  // namespace ringd::runners
