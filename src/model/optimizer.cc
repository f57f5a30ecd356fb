#include "model/optimizer.h"

#include "ringd/error.h"

namespace ringd::model {

Sgd::Sgd(SgdOptions options) : options_(options) {
  RINGD_CHECK_ARG(options_.momentum >= 0 && options_.momentum < 1,
                  "SGD momentum " << options_.momentum << " is outside [0, 1)");
  RINGD_CHECK_ARG(options_.weight_decay >= 0,
                  "SGD weight decay " << options_.weight_decay << " is negative");
}

void Sgd::add_parameter(size_t index, size_t count) {
  if (index >= momentum_.size()) {
    momentum_.resize(index + 1);
    registered_.resize(index + 1, false);
  }
  if (registered_[index]) {
    RINGD_CHECK_ARG(momentum_[index].size() == count,
                    "SGD parameter " << index << " was registered with " << momentum_[index].size()
                                     << " elements, now " << count);
    return;
  }
  momentum_[index].assign(count, 0.0f);
  registered_[index] = true;
}

void Sgd::apply(size_t index, float* w, const float* grad, size_t count, double learning_rate) {
  RINGD_CHECK_ARG(index < registered_.size() && registered_[index],
                  "SGD parameter " << index << " was never registered (add_parameter)");
  std::vector<float>& v = momentum_[index];
  RINGD_CHECK_ARG(v.size() == count, "SGD parameter " << index << " has " << v.size()
                                                      << " elements, the update " << count);
  // In float, element by element in index order: the same bits on every worker and server.
  const float momentum = static_cast<float>(options_.momentum);
  const float decay = static_cast<float>(options_.weight_decay);
  const float lr = static_cast<float>(learning_rate);
  for (size_t i = 0; i < count; ++i) {
    const float g = grad[i] + decay * w[i];
    v[i] = momentum * v[i] + g;
    w[i] = w[i] - lr * v[i];
  }
}

const std::vector<float>& Sgd::state(size_t index) const {
  RINGD_CHECK_ARG(index < registered_.size() && registered_[index],
                  "SGD parameter " << index << " was never registered (add_parameter)");
  return momentum_[index];
}

void Sgd::restore_state(size_t index, const std::vector<float>& momentum) {
  RINGD_CHECK_ARG(index < registered_.size() && registered_[index],
                  "SGD parameter " << index << " was never registered (add_parameter)");
  RINGD_CHECK_ARG(momentum.size() == momentum_[index].size(),
                  "SGD parameter " << index << " has " << momentum_[index].size()
                                   << " elements, the restored momentum " << momentum.size());
  momentum_[index] = momentum;
}

}  // namespace ringd::model
