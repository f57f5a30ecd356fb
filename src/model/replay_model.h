// The replay model: a real network's parameter tensors (a gradient profile: resnet50, vgg16,
// bert_base, ...) with the compute modeled by sleeping (GPU time does not use the CPU), so
// `ringd train --model replay` measures a network's communication under either sync mode without
// running it. backward() hands the gradients over on replay_schedule.h's timetable, the last layer
// first; `ringd bench replay` uses the same timetable.
//
// Parameters start at zero and the gradients are zero, and stay so: averaging or applying them
// changes nothing, so no step spends CPU time filling buffers.
#pragma once

#include <chrono>
#include <vector>

#include "model/gradient_profile.h"
#include "model/model.h"
#include "model/replay_schedule.h"

namespace ringd::model {

class ReplayModel : public Model {
 public:
  // `forward` and `backward` are the modeled compute times of one step's two passes.
  ReplayModel(GradientProfile profile, std::chrono::microseconds forward,
              std::chrono::microseconds backward, ComputeSpread spread);

  const std::vector<ParameterView>& parameters() const override { return params_; }
  size_t input_size() const override { return 0; }
  size_t classes() const override { return 0; }
  std::string describe() const override { return "replay:" + profile_.name; }
  // Sleeps the forward time; loss and accuracy are 0 (there is no data).
  ForwardResult forward(const Batch& batch) override;
  void backward(const GradientReady& ready) override;

 private:
  GradientProfile profile_;
  std::chrono::microseconds forward_;
  std::vector<Emission> schedule_;
  std::vector<float> values_;
  std::vector<float> grads_;
  std::vector<ParameterView> params_;
};

}  // namespace ringd::model
