// A bucket of DGC tensors (Compression::kDgc). Each member goes one of two ways, by the rule of
// compression/dgc_options.h (the same on every rank: it reads the count, the ranks and the epoch):
//
//   sparse members: compressor -> (index, value) pairs, indices offset by the member's place in
//                   the sparse part  ->  ONE sparse_allreduce, adding straight into the tensors
//   dense members:  compressor writes u + v into the fusion buffer  ->  ONE allreduce  ->  copy out
//
// Each rank sends exactly kept_entries(count, sparsity) pairs per sparse member, so the pair
// counts are known on every rank without a round of their own.
#include <cmath>
#include <cstring>

#include "compression/dgc_options.h"
#include "compression/sparse_exchange.h"
#include "fusion/executor.h"
#include "ringd/error.h"

namespace ringd::fusion {

compression::DgcTensorState& Executor::dgc_state(const std::string& name, size_t count,
                                                 float momentum) {
  auto found = dgc_states_.find(name);
  if (found != dgc_states_.end() && found->second.count() != count) {
    dgc_states_.erase(found);  // a new tensor under an old name: its residual means nothing here
    found = dgc_states_.end();
  }
  if (found == dgc_states_.end()) {
    found = dgc_states_.try_emplace(name, count, momentum).first;
  }
  return found->second;
}

void Executor::set_dgc_options(const DgcOptions& options) {
  compression::check_dgc_options(options);
  std::lock_guard<std::mutex> lock(dgc_mutex_);
  RINGD_CHECK_ARG(!dgc_ran_ || options == dgc_options_,
                  "rank " << ctx_.rank()
                          << ": the DGC settings cannot change once a DGC tensor has run (its "
                             "velocity and residual were built under the first ones); give every "
                             "DGC user of this job the same settings");
  dgc_options_ = options;
}

Executor::Traffic Executor::run_dgc(const Bucket& bucket, std::vector<ReadyTensor>& ready) {
  DgcOptions options;
  {
    std::lock_guard<std::mutex> lock(dgc_mutex_);
    dgc_ran_ = true;
    options = dgc_options_;
  }
  const int epoch = epoch_.load();
  const double sparsity = compression::sparsity_at(options, epoch);
  const bool average = ready[bucket.members[0]].tensor.params.op == ReduceOp::kAvg;
  const float clip = options.clip_norm > 0.0f
                         ? options.clip_norm / std::sqrt(static_cast<float>(ctx_.size()))
                         : 0.0f;
  compression::TopkOptions topk;
  topk.sample_fraction = options.sample_fraction;

  std::vector<size_t> sparse, dense;
  size_t dense_elements = 0;
  for (size_t i : bucket.members) {
    const size_t count = ready[i].tensor.tensor.count();
    if (compression::sends_sparse(options, count, ctx_.size(), sparsity)) {
      sparse.push_back(i);
    } else {
      dense.push_back(i);
      dense_elements += count;
    }
  }
  Traffic traffic;
  traffic.sparse_tensors = sparse.size();

  if (!sparse.empty()) {
    const auto start = Timeline::Clock::now();
    dgc_entries_.clear();
    size_t pairs = 0;
    size_t base = 0;
    for (size_t i : sparse) {
      const Tensor& tensor = ready[i].tensor.tensor;
      const size_t keep = compression::kept_entries(tensor.count(), sparsity);
      topk.seed = base;  // a different sample per member, the same on every step
      dgc_state(ready[i].tensor.name, tensor.count(), options.momentum)
          .compress_sparse(static_cast<const float*>(tensor.data), keep, clip, topk, base,
                           &dgc_entries_);
      pairs += keep;
      base += tensor.count();
    }
    mark(bucket, ready, "dgc compress", start);
    const auto exchange = Timeline::Clock::now();
    std::vector<compression::DenseSlice> slices;
    for (size_t i : sparse) {
      Tensor& tensor = ready[i].tensor.tensor;
      slices.push_back({static_cast<float*>(tensor.data), tensor.count()});
    }
    compression::sparse_allreduce(ctx_, dgc_entries_, std::vector<size_t>(ctx_.size(), pairs),
                                  slices, average, config_.collective);
    mark(bucket, ready, "dgc exchange", exchange);
    traffic.compressed_bytes += pairs * sizeof(compression::SparseEntry);
  }

  if (!dense.empty()) {
    float* buffer = static_cast<float*>(fusion_buffer(0, 0, dense_elements * sizeof(float)));
    size_t offset = 0;
    for (size_t i : dense) {
      const Tensor& tensor = ready[i].tensor.tensor;
      dgc_state(ready[i].tensor.name, tensor.count(), options.momentum)
          .compress_dense(static_cast<const float*>(tensor.data), clip, buffer + offset);
      offset += tensor.count();
    }
    const auto start = Timeline::Clock::now();
    allreduce(ctx_, buffer, buffer, dense_elements, DataType::kFloat32,
              average ? ReduceOp::kAvg : ReduceOp::kSum, config_.collective);
    mark(bucket, ready, "allreduce", start);
    offset = 0;
    for (size_t i : dense) {
      Tensor& tensor = ready[i].tensor.tensor;
      std::memcpy(tensor.data, buffer + offset, tensor.bytes());
      offset += tensor.count();
    }
    traffic.compressed_bytes += dense_elements * sizeof(float);
  }
  return traffic;
}

}  // namespace ringd::fusion
