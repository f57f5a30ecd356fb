// SGD with momentum and (decoupled-from-nothing, classic L2) weight decay, the update both modes
// use (allreduce: on every worker; ps: on the server that owns the tensor), so that they agree:
//
//   g' = grad + weight_decay * w
//   v  = momentum * v + g'              (v starts at 0)
//   w  = w - lr * v
//
// One momentum buffer per parameter, kept here by index. Deterministic: the same inputs give
// bitwise the same outputs on every machine of one build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringd::model {

struct SgdOptions {
  double momentum = 0.9;
  double weight_decay = 0.0;
};

class Sgd {
 public:
  explicit Sgd(SgdOptions options = {});

  // Registers (or checks) parameter `index` with `count` elements; momentum starts at zero.
  void add_parameter(size_t index, size_t count);

  // One update of parameter `index` (values `w`, averaged gradient `grad`, both `count` long).
  // Throws ringd::Error(kInvalidArgument) for an unknown index or a different count.
  void apply(size_t index, float* w, const float* grad, size_t count, double learning_rate);

  // Momentum buffers, for checkpoints: state(i) is parameter i's, restore_state replaces them.
  const std::vector<float>& state(size_t index) const;
  void restore_state(size_t index, const std::vector<float>& momentum);

  const SgdOptions& options() const { return options_; }

 private:
  SgdOptions options_;
  std::vector<std::vector<float>> momentum_;
  std::vector<bool> registered_;
};

}  // namespace ringd::model
