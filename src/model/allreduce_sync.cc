#include "model/allreduce_sync.h"

#include <chrono>

#include "ringd/error.h"

namespace ringd::model {

AllreduceSync::AllreduceSync(Engine& engine, SgdOptions options) : engine_(engine), sgd_(options) {}

void AllreduceSync::initialize(const std::vector<ParameterView>& params) {
  params_ = params;
  handles_.assign(params_.size(), Handle());
  std::vector<Handle> broadcasts;
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParameterView& p = params_[i];
    sgd_.add_parameter(i, p.count);
    broadcasts.push_back(engine_.broadcast_async(
        "init." + p.name, Tensor{p.value, DataType::kFloat32, p.shape}, /*root=*/0));
  }
  for (Handle& handle : broadcasts) handle.wait();
}

void AllreduceSync::gradient_ready(size_t index, const StepInfo& step) {
  RINGD_CHECK_ARG(index < params_.size(), "gradient " << index << " of step " << step.step
                                                      << ": the model has " << params_.size()
                                                      << " parameters (initialize first)");
  RINGD_CHECK_ARG(!handles_[index].valid(),
                  "gradient " << params_[index].name << " handed over twice in step " << step.step);
  const ParameterView& p = params_[index];
  handles_[index] =
      engine_.allreduce_async(p.name, Tensor{p.grad, DataType::kFloat32, p.shape}, ReduceOp::kAvg);
  ++handed_;
}

void AllreduceSync::finish_step(const StepInfo& step) {
  if (handed_ != params_.size()) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!handles_[i].valid()) {
        RINGD_THROW(kInternal, "step " << step.step << " finished without gradient "
                                       << params_[i].name << " (" << handed_ << " of "
                                       << params_.size() << " handed over)");
      }
    }
  }
  const auto start = std::chrono::steady_clock::now();
  for (Handle& handle : handles_) handle.wait();
  blocked_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParameterView& p = params_[i];
    sgd_.apply(i, p.value, p.grad, p.count, step.learning_rate);
    handles_[i] = Handle();
  }
  handed_ = 0;
}

}  // namespace ringd::model
