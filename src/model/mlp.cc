#include "model/mlp.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <sstream>

#include "model/openblas_gemm.h"
#include "model/random.h"
#include "ringd/error.h"

namespace ringd::model {
namespace {

constexpr uint64_t kInitPurpose = 1;  // derive_seed purpose: parameter initialisation

std::string with_commas(uint64_t value) {
  std::string digits = std::to_string(value);
  for (size_t i = digits.size(); i > 3; i -= 3) digits.insert(i - 3, ",");
  return digits;
}

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GB", bytes / 1e9);
  return text;
}

double physical_memory_bytes() {
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

std::string layer_text(const std::vector<size_t>& sizes) {
  std::string text;
  for (size_t size : sizes) text += (text.empty() ? "" : ",") + std::to_string(size);
  return text;
}

// "the MLP --layers 784,100000,10 has 78,501,010 parameters: their values and gradients need
// 0.6 GB (float32, 4 bytes each, twice)"
std::string parameter_need(const std::vector<size_t>& sizes, int copies) {
  const size_t count = mlp_parameter_count(sizes);
  std::ostringstream text;
  text << "the MLP --layers " << layer_text(sizes) << " has " << with_commas(count)
       << " floats of parameters: their values and gradients need "
       << gigabytes(8.0 * static_cast<double>(count) * copies);
  if (copies > 1) text << " for the " << copies << " ranks in this process";
  text << " (4 bytes each, twice), and this host has " << gigabytes(physical_memory_bytes())
       << " of memory";
  return text.str();
}

}  // namespace

size_t mlp_parameter_count(const std::vector<size_t>& sizes) {
  size_t total = 0;
  for (size_t k = 0; k + 1 < sizes.size(); ++k) total += sizes[k + 1] * sizes[k] + sizes[k + 1];
  return total;
}

void check_mlp_fits_in_memory(const std::vector<size_t>& sizes, int copies) {
  const double need = 8.0 * static_cast<double>(mlp_parameter_count(sizes)) * copies;
  if (need > physical_memory_bytes()) {
    RINGD_THROW(kInvalidArgument, parameter_need(sizes, copies)
                                      << "; use smaller layers (or fewer ranks per host)");
  }
}

std::vector<size_t> parse_layer_sizes(const std::string& text) {
  std::vector<size_t> sizes;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long long value = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || value < 1 || value > (1 << 20)) {
      RINGD_THROW(kInvalidArgument,
                  "--layers " << text << ": '" << item << "' is not a layer size in 1..1048576");
    }
    sizes.push_back(static_cast<size_t>(value));
  }
  if (sizes.size() < 2) {
    RINGD_THROW(kInvalidArgument,
                "--layers " << text << ": give at least inputs and classes, e.g. 784,256,10");
  }
  return sizes;
}

Mlp::Mlp(std::vector<size_t> layer_sizes, uint64_t seed, std::unique_ptr<Gemm> gemm)
    : sizes_(std::move(layer_sizes)),
      gemm_(gemm ? std::move(gemm) : std::make_unique<OpenBlasGemm>()) {
  RINGD_CHECK_ARG(sizes_.size() >= 2, "an MLP needs at least an input and an output size");
  try {
    values_.assign(mlp_parameter_count(sizes_), 0.0f);
    grads_.assign(values_.size(), 0.0f);
  } catch (const std::bad_alloc&) {
    RINGD_THROW(kIo, parameter_need(sizes_, 1)
                         << "; allocating them failed (std::bad_alloc): the memory is in use by "
                            "other processes or ranks, or limited (ulimit -v, a container's "
                            "limit); use smaller layers");
  }
  size_t offset = 0;
  for (size_t k = 0; k < layers(); ++k) {
    const size_t in = sizes_[k];
    const size_t out = sizes_[k + 1];
    ParameterView weight{"layer" + std::to_string(k) + ".weight",
                         {static_cast<int64_t>(out), static_cast<int64_t>(in)},
                         values_.data() + offset,
                         grads_.data() + offset,
                         out * in};
    // Kaiming-uniform (ReLU gain): U(-sqrt(6 / fan_in), +sqrt(6 / fan_in)), one stream per layer.
    SplitMix64 random(derive_seed(seed, kInitPurpose, k));
    const double bound = std::sqrt(6.0 / static_cast<double>(in));
    for (size_t i = 0; i < weight.count; ++i) {
      weight.value[i] = static_cast<float>((2 * random.uniform() - 1) * bound);
    }
    offset += weight.count;
    ParameterView bias{"layer" + std::to_string(k) + ".bias",
                       {static_cast<int64_t>(out)},
                       values_.data() + offset,
                       grads_.data() + offset,
                       out};
    offset += bias.count;
    params_.push_back(std::move(weight));
    params_.push_back(std::move(bias));
  }
  activations_.resize(layers());
}

std::string Mlp::describe() const { return layer_text(sizes_); }

std::string Mlp::backend() const { return gemm_->name(); }

void Mlp::ensure_batch(size_t rows) {
  for (size_t k = 0; k < layers(); ++k) activations_[k].resize(rows * sizes_[k + 1]);
  size_t widest = 0;
  for (size_t size : sizes_) widest = std::max(widest, size);
  delta_.resize(rows * widest);
  delta_next_.resize(rows * widest);
}

ForwardResult Mlp::forward(const Batch& batch) {
  RINGD_CHECK_ARG(batch.features == input_size(),
                  "the MLP " << describe() << " takes " << input_size() << " inputs, the batch has "
                             << batch.features);
  RINGD_CHECK_ARG(batch.rows > 0, "an empty batch");
  ensure_batch(batch.rows);
  rows_ = batch.rows;
  input_ = batch.inputs;
  labels_.assign(batch.labels, batch.labels + batch.rows);
  const float* h = batch.inputs;
  for (size_t k = 0; k < layers(); ++k) {
    const size_t in = sizes_[k];
    const size_t out = sizes_[k + 1];
    const float* w = params_[2 * k].value;
    const float* b = params_[2 * k + 1].value;
    float* z = activations_[k].data();
    // z[rows, out] = h[rows, in] * w[out, in]^T, then + b (and ReLU below the last layer).
    gemm_->sgemm(false, true, rows_, out, in, 1.0f, h, in, w, in, 0.0f, z, out);
    const bool hidden = k + 1 < layers();
    for (size_t r = 0; r < rows_; ++r) {
      float* row = z + r * out;
      for (size_t j = 0; j < out; ++j) {
        const float v = row[j] + b[j];
        row[j] = hidden ? std::max(v, 0.0f) : v;
      }
    }
    h = z;
  }
  ForwardResult result;
  const double total = softmax_cross_entropy(activations_.back().data(), labels_.data(), rows_,
                                             classes(), &result.correct);
  result.loss = total / static_cast<double>(rows_);
  return result;
}

void Mlp::backward(const GradientReady& ready) {
  RINGD_CHECK_ARG(rows_ > 0, "backward before forward");
  const size_t classes_count = classes();
  // d(mean loss)/dz of the last layer = (softmax - onehot) / rows.
  const float scale = 1.0f / static_cast<float>(rows_);
  const float* probabilities = activations_.back().data();
  for (size_t r = 0; r < rows_; ++r) {
    for (size_t j = 0; j < classes_count; ++j) {
      const float p = probabilities[r * classes_count + j];
      delta_[r * classes_count + j] =
          (p - (static_cast<size_t>(labels_[r]) == j ? 1.0f : 0.0f)) * scale;
    }
  }
  for (size_t k = layers(); k-- > 0;) {
    const size_t in = sizes_[k];
    const size_t out = sizes_[k + 1];
    const float* h = k == 0 ? input_ : activations_[k - 1].data();
    ParameterView& weight = params_[2 * k];
    ParameterView& bias = params_[2 * k + 1];
    // db[out] = column sums of delta, in row order (fixed, so every run sums alike).
    std::fill(bias.grad, bias.grad + out, 0.0f);
    for (size_t r = 0; r < rows_; ++r) {
      for (size_t j = 0; j < out; ++j) bias.grad[j] += delta_[r * out + j];
    }
    ready(2 * k + 1);
    // dW[out, in] = delta[rows, out]^T * h[rows, in]
    gemm_->sgemm(true, false, out, in, rows_, 1.0f, delta_.data(), out, h, in, 0.0f, weight.grad,
                 in);
    ready(2 * k);
    if (k == 0) break;
    // delta_below[rows, in] = delta[rows, out] * W[out, in], times ReLU'(z_below).
    gemm_->sgemm(false, false, rows_, in, out, 1.0f, delta_.data(), out, weight.value, in, 0.0f,
                 delta_next_.data(), in);
    const float* below = activations_[k - 1].data();
    for (size_t i = 0; i < rows_ * in; ++i) {
      if (below[i] <= 0.0f) delta_next_[i] = 0.0f;
    }
    std::swap(delta_, delta_next_);
  }
}

double softmax_cross_entropy(float* logits, const int32_t* labels, size_t rows, size_t classes,
                             size_t* correct) {
  double total = 0;
  size_t right = 0;
  for (size_t r = 0; r < rows; ++r) {
    float* row = logits + r * classes;
    const int32_t label = labels[r];
    if (label < 0 || static_cast<size_t>(label) >= classes) {
      RINGD_THROW(kInvalidArgument, "label " << label << " of batch row " << r
                                             << " is outside the model's " << classes
                                             << " classes");
    }
    const size_t best = static_cast<size_t>(std::max_element(row, row + classes) - row);
    if (best == static_cast<size_t>(label)) ++right;
    const float top = row[best];
    double sum = 0;
    for (size_t j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(row[j] - top));
    const double log_sum = std::log(sum);
    total += log_sum - static_cast<double>(row[label] - top);
    for (size_t j = 0; j < classes; ++j) {
      row[j] = static_cast<float>(std::exp(static_cast<double>(row[j] - top) - log_sum));
    }
  }
  *correct = right;
  return total;
}

}  // namespace ringd::model
