// What `ringd train` trains: named parameter tensors, a forward pass over a batch and a backward
// pass that hands each finished gradient over at once, so that its communication overlaps the
// rest of backward. Two models implement it: the MLP (mlp.h, real arithmetic through OpenBLAS or
// cuBLAS) and the replay model (replay_model.h, a real network's gradient sizes with modeled
// compute time).
//
//   model.forward(batch)                       // loss and accuracy of this worker's batch
//   model.backward([&](size_t i) { ... })      // i = parameter index, the last layer's first;
//                                              // parameters()[i].grad is final when i is handed
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/parameter_sync.h"

namespace ringd::model {

// One worker's batch: `rows` samples of `features` float inputs each (row-major) and their labels.
struct Batch {
  const float* inputs = nullptr;
  const int32_t* labels = nullptr;
  size_t rows = 0;
  size_t features = 0;
};

struct ForwardResult {
  double loss = 0;     // mean softmax cross-entropy over the batch
  size_t correct = 0;  // samples whose largest logit is the label
};

using GradientReady = std::function<void(size_t index)>;

class Model {
 public:
  virtual ~Model() = default;

  // Registration order; the memory stays put for the model's lifetime.
  virtual const std::vector<ParameterView>& parameters() const = 0;
  // Input features and classes (0 for a model without data, like the replay model).
  virtual size_t input_size() const = 0;
  virtual size_t classes() const = 0;
  // "784,256,10", "replay:resnet50": what the model is, for logs, summaries and checkpoints.
  virtual std::string describe() const = 0;
  // What computes it ("openblas", "cublas"), or "" for a model without arithmetic of its own.
  virtual std::string backend() const { return ""; }

  // Runs the batch forward and keeps what backward needs (the batch's memory must stay valid
  // until backward returns).
  virtual ForwardResult forward(const Batch& batch) = 0;
  // Gradients of the mean loss of the last forward, written into parameters()[i].grad. `ready(i)`
  // is called once per parameter, as soon as that gradient is complete, in reverse registration
  // order (the last layer first); afterwards backward never touches that gradient again.
  virtual void backward(const GradientReady& ready) = 0;
};

}  // namespace ringd::model
