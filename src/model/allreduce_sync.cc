#include "model/allreduce_sync.h"

#include <chrono>
#include <cstring>

#include "ringd/error.h"

namespace ringd::model {

AllreduceSync::AllreduceSync(Engine& engine, SgdOptions options,
                             std::vector<std::vector<ParameterView>> replicas,
                             LocalGroup* group_memory)
    : engine_(engine), sgd_(options), replicas_(std::move(replicas)), group_memory_(group_memory) {
  RINGD_CHECK_ARG(replicas_.size() + 1 == static_cast<size_t>(engine_.local_devices()),
                  "rank " << engine_.rank() << ": " << replicas_.size() + 1
                          << " model replica(s) for an engine over " << engine_.local_devices()
                          << " local device(s)");
  RINGD_CHECK_ARG(!group_memory_ || group_memory_->size() == engine_.local_devices(),
                  "rank " << engine_.rank() << ": gradients staged into a group of "
                          << group_memory_->size() << " device(s) for an engine over "
                          << engine_.local_devices());
}

const ParameterView& AllreduceSync::view(size_t index, int device) const {
  return device == 0 ? params_[index] : replicas_[device - 1][index];
}

Submission AllreduceSync::upload(size_t index, bool gradients) {
  const ParameterView& p = params_[index];
  Submission s;
  s.name = p.name;
  for (int d = 0; d < engine_.local_devices(); ++d) {
    const ParameterView& host = view(index, d);
    const DeviceBuffer buffer{group_buffers_[index][d].get(), d};
    group_memory_->upload(buffer, gradients ? host.grad : host.value, p.count * sizeof(float));
    if (d == 0) {
      s.tensor = Tensor{buffer.data, DataType::kFloat32, p.shape};
    } else {
      s.other_devices.push_back(buffer.data);
    }
  }
  return s;
}

std::vector<void*> AllreduceSync::replica_buffers(size_t index, bool gradients) const {
  std::vector<void*> buffers;
  for (const std::vector<ParameterView>& replica : replicas_) {
    buffers.push_back(gradients ? replica[index].grad : replica[index].value);
  }
  return buffers;
}

void AllreduceSync::initialize(const std::vector<ParameterView>& params) {
  params_ = params;
  for (const std::vector<ParameterView>& replica : replicas_) {
    RINGD_CHECK_ARG(
        replica.size() == params_.size(),
        "a model replica has " << replica.size() << " parameters, device 0's " << params_.size());
  }
  handles_.assign(params_.size(), Handle());
  if (group_memory_) {
    group_buffers_.assign(params_.size(), {});
    for (size_t i = 0; i < params_.size(); ++i) {
      for (int d = 0; d < engine_.local_devices(); ++d) {
        group_buffers_[i].push_back(group_memory_->allocate(d, params_[i].count * sizeof(float)));
      }
    }
  }
  std::vector<Handle> broadcasts;
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParameterView& p = params_[i];
    sgd_.add_parameter(i, p.count);
    Submission s;
    if (group_memory_) {
      s = upload(i, /*gradients=*/false);
    } else {
      s.tensor = Tensor{p.value, DataType::kFloat32, p.shape};
      s.other_devices = replica_buffers(i, /*gradients=*/false);
    }
    s.name = "init." + p.name;
    s.kind = CollectiveKind::kBroadcast;
    s.root = 0;
    broadcasts.push_back(engine_.submit(std::move(s)));
  }
  for (Handle& handle : broadcasts) handle.wait();
  for (size_t i = 0; group_memory_ && i < params_.size(); ++i) {
    for (int d = 0; d < engine_.local_devices(); ++d) {
      group_memory_->download(view(i, d).value, DeviceBuffer{group_buffers_[i][d].get(), d},
                              params_[i].count * sizeof(float));
    }
  }
}

void AllreduceSync::gradient_ready(size_t index, const StepInfo& step) {
  RINGD_CHECK_ARG(index < params_.size(), "gradient " << index << " of step " << step.step
                                                      << ": the model has " << params_.size()
                                                      << " parameters (initialize first)");
  RINGD_CHECK_ARG(!handles_[index].valid(),
                  "gradient " << params_[index].name << " handed over twice in step " << step.step);
  const ParameterView& p = params_[index];
  Submission s;
  if (group_memory_) {
    s = upload(index, /*gradients=*/true);
  } else {
    s.name = p.name;
    s.tensor = Tensor{p.grad, DataType::kFloat32, p.shape};
    s.other_devices = replica_buffers(index, /*gradients=*/true);
  }
  s.op = ReduceOp::kAvg;
  handles_[index] = engine_.submit(std::move(s));
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
    if (group_memory_) {
      group_memory_->download(p.grad, DeviceBuffer{group_buffers_[i][0].get(), 0},
                              p.count * sizeof(float));
    }
    sgd_.apply(i, p.value, p.grad, p.count, step.learning_rate);
    for (const std::vector<ParameterView>& replica : replicas_) {
      std::memcpy(replica[i].value, p.value, p.count * sizeof(float));
    }
    handles_[i] = Handle();
  }
  handed_ = 0;
}

}  // namespace ringd::model
