// One rank of `ringd train`:
//
//   model (seeded) -> [--resume: rank 0 reads the newest intact checkpoint, every rank receives its
//   position and optimizer state] -> sync.initialize (rank 0's parameters everywhere) -> steps:
//
//     lr    = schedule(step)                      linear warm-up, then lr x world size
//     batch = this rank's slice of the step's global batch (model/dataset.h)
//     forward; backward -> sync.gradient_ready(i) per gradient, last layer first
//     sync.finish_step                            averaged gradients applied: same params on all
//     rank 0: progress line; test accuracy at an epoch's end; checkpoint every K steps and at the
//     end
//     a stop request (TrainHooks::stop_requested, SIGTERM in `ringd train`): all ranks stop after
//     the same step, rank 0 writes a checkpoint of it
//
// When a step fails (a dead peer, a timeout) in allreduce mode, rank 0 writes a checkpoint of the
// last step that completed before rethrowing: its parameters and momentum are untouched until
// every gradient of a step has arrived, so they are exactly those of the step before.
//
// The data order and the schedule depend only on (seed, step), so a resumed run repeats exactly
// what the uninterrupted run would have done.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/dataset.h"
#include "model/parameter_sync.h"
#include "ringd/transport.h"
#include "runners/train_config.h"

namespace ringd::runners {

// Read once per process (inproc ranks share it).
struct TrainData {
  model::Dataset train;
  model::Dataset test;  // rows == 0: no evaluation
};

// Loads what the config's model needs (nothing for the replay model). `with_test`: rank 0 only.
TrainData load_train_data(const TrainConfig& config, bool with_test);

struct EpochResult {
  int64_t epoch = 0;  // from 1
  int64_t step = 0;   // global steps completed
  double test_accuracy = -1;
};

struct TrainSummary {
  std::string mode;
  std::string model;
  std::string blas;  // the MLP's matrix products: "openblas" or "cublas" ("" for the replay model)
  std::string transport;
  std::string compression = "none";  // allreduce mode's gradient compression
  int ranks = 0;
  int local_devices = 1;    // per rank (node); the world is ranks x local_devices
  std::string local_group;  // the devices' kind with local_devices > 1 or --gpus: "cpu", "nccl"
  size_t global_batch = 0;
  double learning_rate = 0;              // after world-size scaling (the peak, with a schedule)
  std::string lr_schedule = "constant";  // after the warm-up: "constant" or "cosine"
  int64_t start_step = 0;                // > 0 after --resume
  int64_t steps = 0;                     // global steps completed at the end
  int64_t steps_per_epoch = 0;
  double train_seconds = 0;  // time in steps (this run)
  double blocked_seconds = 0;
  double samples_per_second = 0;
  double comm_share = 0;  // blocked / step time
  double last_loss = 0;   // mean over the last progress interval (rank 0's batches)
  double last_accuracy = 0;
  double test_accuracy = -1;  // at the end (-1: not evaluated)
  std::vector<EpochResult> epochs;
  std::string checkpoint;           // the last one written ("" = none)
  int64_t checkpoint_failures = 0;  // periodic checkpoints that could not be written (warned)
  std::string resumed_from;
  std::string params_sha256;  // of every parameter's bytes, registration order
  // Non-zero: the run stopped early, after `steps`, because a rank asked to (TrainHooks::
  // stop_requested); the number is this rank's signal, or SIGTERM's where another rank asked.
  int stopped_by_signal = 0;
  // --elastic (runners/elastic_train.h): how many generations this process trained in and its
  // rank in the last one (whose rank 0's summary is the job's; `ranks` is that generation's), and
  // the updates the final parameters went through (every step's exactly once: `steps`).
  int64_t generations = 0;
  int final_rank = 0;
  int64_t steps_applied = 0;
};

struct TrainHooks {
  // After every step's finish_step, on every rank (tests check the replicas).
  std::function<void(int rank, int64_t step, const std::vector<model::ParameterView>&)> after_step;
  // Receives the final parameters (every rank); not called when the run stopped early.
  std::function<void(int rank, const std::vector<model::ParameterView>&)> at_end;
  // Asked once per step on every rank (set it for all or none): a signal number asks the job to
  // stop (0: go on). In allreduce mode every rank learns of any rank's request with the step's
  // gradients and all stop after that same step; rank 0 then writes a checkpoint (with
  // --checkpoint-dir), so that --resume continues from there. In parameter-server mode only the
  // asking worker stops (the others learn of it as of a dead worker).
  std::function<int(int rank)> stop_requested;
};

// Runs on every rank; rank 0's summary is the one to print. Throws ringd::Error.
TrainSummary run_train_rank(Context& ctx, const TrainConfig& config, const TrainData& data,
                            const TrainHooks& hooks = {});

// The learning rate of global step `step` (from 0) of a run planned for `planned_steps` steps
// (epochs x steps per epoch; only the cosine schedule reads it).
double learning_rate_at(const TrainConfig& config, int world_size, int64_t step,
                        int64_t planned_steps);

const char* lr_schedule_name(LrSchedule schedule);  // "constant", "cosine"

}  // namespace ringd::runners
