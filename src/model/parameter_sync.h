// How a trainer's gradients become the same updated parameters on every worker. The trainer
// (`ringd train`) drives one ParameterSync per process and does not know which one it has:
//
//   allreduce mode  AllreduceSync: each ready gradient goes into the fusion engine (averaged across
//                   ranks while backward goes on); finish_step waits and applies the optimizer
//                   locally, identically on every rank.
//   ps mode         PsSync (src/ps/): gradients are pushed to the servers that own them; the
//   servers
//                   aggregate (sync) or apply at once (async) with the same optimizer; finish_step
//                   pulls the new values.
//
//   sync->initialize(views);                  // once: every worker starts from the same values
//   for each step:
//     model.backward([&](size_t i) { sync->gradient_ready(i, step_info); });   // last layer first
//     sync->finish_step(step_info);           // views now hold the step's parameters
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringd::model {

class Sgd;

// One named parameter tensor of the model: its values and its gradient buffer (same count). The
// memory belongs to the model and stays put for the model's lifetime.
struct ParameterView {
  std::string name;
  std::vector<int64_t> shape;
  float* value = nullptr;
  float* grad = nullptr;
  size_t count = 0;
};

struct StepInfo {
  int64_t step = 0;          // global step, from 0; the same on every worker in sync modes
  double learning_rate = 0;  // after world-size scaling and warm-up (the trainer's schedule)
};

class ParameterSync {
 public:
  virtual ~ParameterSync() = default;

  // Once, before the first step, with every parameter in registration order (indices below refer
  // to this list). Afterwards every worker holds the same values (rank 0's, or the servers').
  virtual void initialize(const std::vector<ParameterView>& params) = 0;

  // params[index].grad holds this worker's complete gradient for the step (the local mean over its
  // batch). It must stay untouched until finish_step returns. Called once per parameter per step.
  virtual void gradient_ready(size_t index, const StepInfo& step) = 0;

  // Every gradient of the step was handed over: blocks until every params[i].value holds the
  // parameters after the step. Throws ringd::Error (naming the peer / tensor) on failure.
  virtual void finish_step(const StepInfo& step) = 0;

  // Seconds spent blocked in finish_step since construction (the "communication share" that
  // backward did not hide).
  virtual double blocked_seconds() const = 0;

  // The optimizer, when this process runs it (allreduce mode): the trainer checkpoints its momentum
  // and restores it on --resume. Null when the optimizer runs elsewhere (ps mode: the servers keep
  // the momentum, and a checkpoint holds parameters only).
  virtual Sgd* local_optimizer() { return nullptr; }
};

}  // namespace ringd::model
