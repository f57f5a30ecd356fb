#include "model/replay_model.h"

#include <thread>

namespace ringd::model {

ReplayModel::ReplayModel(GradientProfile profile, std::chrono::microseconds forward,
                         std::chrono::microseconds backward, ComputeSpread spread)
    : profile_(std::move(profile)),
      forward_(forward),
      schedule_(backward_schedule(profile_, backward, spread)),
      values_(profile_.total_elements(), 0.0f),
      grads_(profile_.total_elements(), 0.0f) {
  size_t offset = 0;
  for (const GradientTensor& tensor : profile_.tensors) {
    params_.push_back(ParameterView{tensor.name,
                                    {static_cast<int64_t>(tensor.elements)},
                                    values_.data() + offset,
                                    grads_.data() + offset,
                                    tensor.elements});
    offset += tensor.elements;
  }
}

ForwardResult ReplayModel::forward(const Batch& /*batch*/) {
  if (forward_.count() > 0) std::this_thread::sleep_for(forward_);
  return ForwardResult{};
}

void ReplayModel::backward(const GradientReady& ready) {
  const auto start = std::chrono::steady_clock::now();
  for (const Emission& emission : schedule_) {
    if (emission.at.count() > 0) std::this_thread::sleep_until(start + emission.at);
    ready(emission.tensor);
  }
}

}  // namespace ringd::model
