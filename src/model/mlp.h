// A multi-layer perceptron: fully connected layers with ReLU between them and softmax
// cross-entropy on the last. Matrix products go through a Gemm backend (gemm.h): OpenBLAS on the
// CPU by default, or cuBLAS on a GPU in builds with it (`ringd train --blas`); everything else
// (bias, ReLU, softmax, the parameters and gradients) stays in host memory on the CPU.
//
// Layer k maps n_k inputs to n_{k+1} outputs: z = h W^T + b, with
//   layer<k>.weight  [n_{k+1}, n_k]   row-major, Kaiming-uniform from the seed
//   layer<k>.bias    [n_{k+1}]        zero
// registered in that order, layer 0 first. Backward hands over layer k's bias, then its weight,
// from the last layer down to layer 0: exactly reverse registration order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/gemm.h"
#include "model/model.h"

namespace ringd::model {

// "784,256,10" -> {784, 256, 10}; at least two sizes, each 1..1<<20. Throws kInvalidArgument.
std::vector<size_t> parse_layer_sizes(const std::string& text);

// Floats of an MLP's parameters (every weight and bias) with these layer sizes.
size_t mlp_parameter_count(const std::vector<size_t>& sizes);

// Throws kInvalidArgument, saying what the parameters need and what this host has, when `copies`
// MLPs of these sizes (one per rank in this process) cannot fit in the host's physical memory:
// their values and gradients alone (8 bytes per parameter; momentum and activations come on top)
// are more than it has. A check before any work; what passes may still fail to allocate.
void check_mlp_fits_in_memory(const std::vector<size_t>& sizes, int copies);

class Mlp : public Model {
 public:
  // `gemm` does the matrix products; null = OpenBLAS. The initial parameters depend only on the
  // sizes and the seed, never on the backend.
  Mlp(std::vector<size_t> layer_sizes, uint64_t seed, std::unique_ptr<Gemm> gemm = nullptr);

  const std::vector<ParameterView>& parameters() const override { return params_; }
  size_t input_size() const override { return sizes_.front(); }
  size_t classes() const override { return sizes_.back(); }
  std::string describe() const override;
  std::string backend() const override;
  ForwardResult forward(const Batch& batch) override;
  void backward(const GradientReady& ready) override;

  const std::vector<size_t>& layer_sizes() const { return sizes_; }
  const Gemm& gemm() const { return *gemm_; }

 private:
  size_t layers() const { return sizes_.size() - 1; }
  void ensure_batch(size_t rows);

  std::vector<size_t> sizes_;
  std::unique_ptr<Gemm> gemm_;
  std::vector<float> values_;  // every parameter, registration order
  std::vector<float> grads_;
  std::vector<ParameterView> params_;
  // Of the last forward: the input, each layer's output (after ReLU for hidden layers; the
  // softmax probabilities for the last) and the labels.
  const float* input_ = nullptr;
  std::vector<std::vector<float>> activations_;
  std::vector<int32_t> labels_;
  size_t rows_ = 0;
  std::vector<float> delta_;       // d loss / d z of the layer being differentiated
  std::vector<float> delta_next_;  // ... and of the layer below it
};

// Softmax cross-entropy of `rows` x `classes` logits, in place: `logits` becomes the
// probabilities. Returns the summed loss; *correct counts argmax == label.
double softmax_cross_entropy(float* logits, const int32_t* labels, size_t rows, size_t classes,
                             size_t* correct);

}  // namespace ringd::model
