// ParameterSync for allreduce mode: every worker averages the gradients through the fusion engine
// and applies the same SGD update itself.
//
//   initialize       broadcast every parameter from rank 0 ("init.<name>"), register it with SGD
//   gradient_ready   allreduce_async(<name>, grad, kAvg): communication starts while backward
//                    goes on computing the layers below
//   finish_step      wait for every handle (the time blocked here is the communication backward
//                    did not hide), then w -= lr * v for every parameter, in index order
//
// The allreduce gives every rank the same bits, and the update is deterministic, so parameters
// stay bitwise identical on all ranks after every step.
//
// Over local devices (an engine with EngineOptions::local_group of L devices) the views passed to
// initialize() are device 0's and `replicas` holds devices 1..L-1's views of the same model: their
// gradients go into the engine with device 0's (Submission::other_devices), and after the update,
// which runs once on device 0, their values are copied from device 0's.
//
// With `group_memory` (a group whose buffers are device memory: the NCCL group of `ringd train
// --gpus`) the model's tensors stay in host memory, where the MLP keeps them, and the engine sees
// copies in memory the group allocated, one per parameter per device: each device's gradient is
// uploaded when it is handed over, and device 0's averaged gradient downloaded before the update
// (the initial broadcast likewise). Two copies per gradient per step that a device-resident model
// would not need; the engine, the NCCL group and the step across nodes are those of any GPU
// buffer. Over CPU devices (whose allocate() is host memory) the same path runs without a GPU,
// which is how the tests check it.
#pragma once

#include <memory>
#include <vector>

#include "model/optimizer.h"
#include "model/parameter_sync.h"
#include "ringd/engine.h"
#include "ringd/local_group.h"

namespace ringd::model {

class AllreduceSync : public ParameterSync {
 public:
  // The engine must outlive this object; nothing else may submit the parameters' names to it.
  // group_memory: null, or the engine's local group (see above); it must outlive this object.
  AllreduceSync(Engine& engine, SgdOptions options,
                std::vector<std::vector<ParameterView>> replicas = {},
                LocalGroup* group_memory = nullptr);

  void initialize(const std::vector<ParameterView>& params) override;
  void gradient_ready(size_t index, const StepInfo& step) override;
  void finish_step(const StepInfo& step) override;
  double blocked_seconds() const override { return blocked_seconds_; }

  Sgd* local_optimizer() override { return &sgd_; }

 private:
  // The parameter's buffers on devices 1..L-1 (values or gradients).
  std::vector<void*> replica_buffers(size_t index, bool gradients) const;
  // group_memory: device d's host view of parameter `index` (d = 0: params_).
  const ParameterView& view(size_t index, int device) const;
  // group_memory: what the engine gets for parameter `index` after uploading every device's
  // values or gradients into its group buffers.
  Submission upload(size_t index, bool gradients);

  Engine& engine_;
  Sgd sgd_;
  std::vector<std::vector<ParameterView>> replicas_;  // [device - 1][parameter]
  std::vector<ParameterView> params_;
  LocalGroup* group_memory_;
  std::vector<std::vector<std::shared_ptr<void>>> group_buffers_;  // [parameter][device]
  std::vector<Handle> handles_;  // this step's allreduce per parameter (invalid = not handed yet)
  size_t handed_ = 0;
  double blocked_seconds_ = 0;
};

}  // namespace ringd::model
