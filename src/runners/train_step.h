// One global step of `ringd train` on one rank (a node of `devices` devices):
//
//   batch   each device's share of the step's global batch (global rank = rank x devices + d),
//           in the order model/dataset.h derives from (seed, epoch)
//   forward on every device; backward on devices 1..L-1 first, then on device 0, handing each
//           gradient to the ParameterSync as it finishes (communication overlaps backward)
//   vote    with the first gradient, this rank's stop request (TrainHooks::stop_requested): in
//           allreduce mode averaged through the engine, so all ranks stop after the same step
//   sync    finish_step: every device holds the step's parameters
//
// TrainStep owns the devices' models, the local group and the vote; the loop around it
// (train_runner.cc) does the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/model.h"
#include "model/parameter_sync.h"
#include "ringd/engine.h"
#include "ringd/local_group.h"
#include "ringd/transport.h"
#include "runners/train_config.h"
#include "runners/train_runner.h"

namespace ringd::runners {

// How big a run is: what the global batch, the learning rate and the checkpoints scale with.
struct TrainShape {
  int devices = 1;  // per rank: --local-devices (allreduce mode), else 1
  int world = 1;    // ranks x devices
  size_t global_batch = 0;
  int64_t steps_per_epoch = 0;
  int64_t planned_steps = 0;  // epochs x steps per epoch: the lr schedule's length
  int64_t total_steps = 0;    // planned_steps cut by --max-steps
};

class TrainStep {
 public:
  // Builds device 0's model and the replicas (agreeing on --blas with the other ranks) and the
  // local group, and checks the data against the model. `compression` is the engine's.
  TrainStep(Context& ctx, const TrainConfig& config, const TrainData& data,
            Compression compression);
  ~TrainStep();

  const TrainShape& shape() const { return shape_; }
  model::Model& model() { return *model_; }  // device 0's
  const model::Model& model() const { return *model_; }
  // Devices 1..L-1's parameters (AllreduceSync copies device 0's values into them).
  std::vector<std::vector<model::ParameterView>> replica_parameters() const;
  LocalGroup* group() const { return group_.get(); }
  // Whether the engine sees the gradients in memory the group allocated (--gpus; tests over CPU
  // devices).
  bool group_memory() const;
  double gradient_bytes_per_step() const;

  // Allreduce mode: the engine the vote goes through and DGC's warm-up reads the epoch from (null:
  // none). Set before the first run() and reset before the engine goes.
  void set_engine(Engine* engine) { engine_ = engine; }

  // Runs global step `step`; `stop_requested` (may be empty) is asked once, and once more when
  // another rank's vote stops this step. Returns the mean loss and the hits over every device's
  // batch.
  model::ForwardResult run(model::ParameterSync& sync, int64_t step, const model::StepInfo& info,
                           const std::function<int(int rank)>& stop_requested);
  // After run(): 0 to go on, else the signal to report (this rank's, or SIGTERM's where another
  // rank asked).
  int stop() const { return stop_; }
  // Whether the stop came from this rank's own request.
  bool stopped_here() const { return local_stop_ != 0; }

 private:
  void assemble_batches(int64_t step);
  model::ForwardResult forward_on_every_device();
  void submit_stop_vote(const std::function<int(int rank)>& stop_requested);
  int stop_vote_result(const std::function<int(int rank)>& stop_requested);

  const TrainConfig& config_;
  const TrainData& data_;
  const int rank_;
  TrainShape shape_;
  std::unique_ptr<model::Model> model_;                  // device 0's
  std::vector<std::unique_ptr<model::Model>> replicas_;  // devices 1..devices-1
  std::unique_ptr<LocalGroup> group_;                    // with devices > 1 or --gpus
  Engine* engine_ = nullptr;

  // Per device: its share of the global batch.
  std::vector<std::vector<float>> inputs_;
  std::vector<std::vector<int32_t>> labels_;
  std::vector<model::Batch> batches_;
  std::vector<uint32_t> order_;
  int64_t order_epoch_ = -1;

  int local_stop_ = 0;             // this step's stop request
  int stop_ = 0;                   // the step's outcome of the vote
  std::vector<float> stop_votes_;  // one per device: the engine averages them in place
  std::vector<std::shared_ptr<void>> group_stop_votes_;  // group_memory(): what the engine sees
  Handle stop_handle_;
};

}  // namespace ringd::runners
