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
#pragma once

#include <vector>

#include "model/optimizer.h"
#include "model/optimizer_state.h"
#include "model/parameter_sync.h"
#include "ringd/engine.h"

namespace ringd::model {

class AllreduceSync : public ParameterSync, public LocalOptimizer {
 public:
  // The engine must outlive this object; nothing else may submit the parameters' names to it.
  AllreduceSync(Engine& engine, SgdOptions options);

  void initialize(const std::vector<ParameterView>& params) override;
  void gradient_ready(size_t index, const StepInfo& step) override;
  void finish_step(const StepInfo& step) override;
  double blocked_seconds() const override { return blocked_seconds_; }

  Sgd& optimizer() override { return sgd_; }

 private:
  Engine& engine_;
  Sgd sgd_;
  std::vector<ParameterView> params_;
  std::vector<Handle> handles_;  // this step's allreduce per parameter (invalid = not handed yet)
  size_t handed_ = 0;
  double blocked_seconds_ = 0;
};

}  // namespace ringd::model
