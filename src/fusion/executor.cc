#include "fusion/executor.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "allreduce/hierarchy_pipeline.h"
#include "ringd/collectives.h"
#include "ringd/error.h"

namespace ringd::fusion {
namespace {

const char* collective_phase(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllreduce: return "allreduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kAllgather: return "allgather";
  }
  return "collective";
}

bool is_dgc(const Bucket& bucket, const std::vector<ReadyTensor>& ready) {
  const TensorParams& params = ready[bucket.members[0]].tensor.params;
  return params.dtype == DataType::kFloat32 && params.compression == Compression::kDgc;
}

// "'a', 'b', 'c', 'd' and 5 more": the members of `buckets`, for error messages.
std::string member_names(const std::vector<const Bucket*>& buckets,
                         const std::vector<ReadyTensor>& ready, size_t* total) {
  std::ostringstream os;
  size_t shown = 0;
  *total = 0;
  for (const Bucket* bucket : buckets) {
    for (size_t i : bucket->members) {
      if (shown < 4) os << (shown ? ", " : "") << "'" << ready[i].tensor.name << "'";
      shown += shown < 4;
      ++*total;
    }
  }
  if (shown < *total) os << " and " << *total - shown << " more";
  return os.str();
}

}  // namespace

Executor::Executor(Context& ctx, const EngineConfig& config, Timeline* timeline)
    : ctx_(ctx),
      config_(config),
      timeline_(timeline),
      copier_(config.copy_threads),
      dgc_options_(config.dgc) {}

Executor::Counts Executor::run(std::vector<ReadyTensor>& ready, const Complete& complete,
                               const BucketDone& bucket_done) {
  Counts counts;
  const std::vector<Bucket> buckets = plan_buckets(
      ready, config_.fusion_threshold_bytes, config_.fusion_max_tensor_bytes,
      /*copy_free_allreduces=*/config_.local_group == nullptr || host_memory(*config_.local_group));
  size_t b = 0;
  while (b < buckets.size()) {
    // What runs together: every consecutive allreduce bucket but DGC's, as one pipeline
    // (run_allreduces); any other bucket alone.
    std::vector<const Bucket*> batch{&buckets[b]};
    const auto pipelines = [&](const Bucket& bucket) {
      return bucket.kind == CollectiveKind::kAllreduce &&
             (config_.local_group || !is_dgc(bucket, ready));
    };
    const bool pipelined = pipelines(buckets[b]);
    while (pipelined && b + batch.size() < buckets.size() && pipelines(buckets[b + batch.size()])) {
      batch.push_back(&buckets[b + batch.size()]);
    }
    if (timeline_) {
      const auto now = Timeline::Clock::now();
      for (size_t k = 0; k < batch.size(); ++k) {
        for (size_t i : batch[k]->members) {
          timeline_->instant(ready[i].tensor.name, "fused", now,
                             {{"bucket", static_cast<int64_t>(b + k)},
                              {"tensors", static_cast<int64_t>(batch[k]->members.size())},
                              {"bytes", static_cast<int64_t>(batch[k]->bytes)}});
        }
      }
    }
    std::vector<Traffic> traffic;
    try {
      if (pipelined) {
        traffic = run_allreduces(batch, ready);
      } else {
        traffic.push_back(run_bucket(*batch[0], ready));
      }
    } catch (const Error& error) {
      size_t tensors = 0;
      const std::string names = member_names(batch, ready, &tensors);
      std::ostringstream os;
      os << "rank " << ctx_.rank() << ": " << collective_phase(batch[0]->kind) << " of " << tensors
         << " fused tensor(s) ";
      if (batch.size() > 1) os << "in " << batch.size() << " buckets ";
      os << "(" << names << ") failed: " << error.what();
      throw Error(error.code(), os.str());
    }
    for (size_t k = 0; k < batch.size(); ++k) {
      const Bucket& bucket = *batch[k];
      bucket_done(bucket.members.size(), bucket.bytes, traffic[k]);
      for (size_t i : bucket.members) complete(ready[i], nullptr);
      counts.bytes += bucket.bytes;
      ++counts.buckets;
      if (bucket.members.size() > 1) counts.fused_tensors += bucket.members.size();
    }
    b += batch.size();
  }
  return counts;
}

Executor::Traffic Executor::run_bucket(const Bucket& bucket, std::vector<ReadyTensor>& ready) {
  Traffic traffic;
  traffic.compressed_bytes = bucket.bytes;
  if (config_.local_group) {
    // run() sends every allreduce but DGC ones to run_allreduces, and
    // checked_params() keeps allgather and DGC off such engines: a broadcast is left.
    run_hierarchical_broadcast(bucket, ready);
    return traffic;
  }
  switch (bucket.kind) {
    case CollectiveKind::kAllreduce: return run_dgc(bucket, ready);  // the others: run_allreduces
    case CollectiveKind::kBroadcast: run_broadcast(bucket, ready); break;
    case CollectiveKind::kAllgather: run_allgather(ready[bucket.members[0]]); break;
  }
  return traffic;
}

void Executor::mark(const Bucket& bucket, std::vector<ReadyTensor>& ready, const char* phase,
                    Timeline::Clock::time_point start) {
  if (!timeline_) return;
  const auto end = Timeline::Clock::now();
  for (size_t i : bucket.members) timeline_->span(ready[i].tensor.name, phase, start, end);
}

void Executor::copy(const Bucket& bucket, std::vector<ReadyTensor>& ready,
                    std::vector<CopyPiece> pieces, CopyMode mode, Compression compression,
                    const char* phase) {
  const auto start = Timeline::Clock::now();
  copier_.run(pieces, mode, compression);
  mark(bucket, ready, phase, start);
}

void* Executor::fusion_buffer(int device, int slot, size_t bytes) {
  if (slots_.size() <= static_cast<size_t>(device)) slots_.resize(static_cast<size_t>(device) + 1);
  return slots_[device][slot].reserve(bytes);
}

std::vector<Executor::AllreducePlan> Executor::plan_allreduces(
    const std::vector<const Bucket*>& buckets, const std::vector<ReadyTensor>& ready, int devices,
    bool can_copy, bool lists) {
  std::vector<AllreducePlan> plans;
  int fused = 0;
  for (const Bucket* bucket : buckets) {
    const TensorParams& params = ready[bucket->members[0]].tensor.params;
    AllreducePlan plan;
    plan.bucket = bucket;
    plan.compression =
        params.dtype == DataType::kFloat32 && can_copy ? params.compression : Compression::kNone;
    plan.wire = wire_dtype(params.dtype, plan.compression);
    plan.wire_size = wire_element_size(params.dtype, plan.compression);
    for (size_t i : bucket->members) plan.total += ready[i].tensor.tensor.count();
    plan.in_place = !can_copy || (plan.compression == Compression::kNone &&
                                  (bucket->members.size() == 1 || lists));
    if (!plan.in_place) plan.slot = fused++ % 2;
    plans.push_back(plan);
  }
  // Grow each slot once, to its largest bucket, before any pointer into it is taken.
  std::array<size_t, 2> largest{0, 0};
  for (const AllreducePlan& plan : plans) {
    if (!plan.in_place)
      largest[plan.slot] = std::max(largest[plan.slot], plan.total * plan.wire_size);
  }
  for (int d = 0; d < devices; ++d) {
    for (int slot = 0; slot < 2; ++slot) {
      if (largest[slot] > 0) fusion_buffer(d, slot, largest[slot]);
    }
  }
  return plans;
}

void* device_data(const ReadyTensor& ready, int device) {
  return device == 0 ? ready.tensor.tensor.data
                     : ready.tensor.other_devices[static_cast<size_t>(device) - 1];
}

std::vector<DeviceBuffer> device_buffers(const ReadyTensor& ready) {
  std::vector<DeviceBuffer> buffers;
  for (int d = 0; d <= static_cast<int>(ready.tensor.other_devices.size()); ++d) {
    buffers.push_back({device_data(ready, d), d});
  }
  return buffers;
}

void Executor::fused_pieces(const AllreducePlan& plan, const std::vector<ReadyTensor>& ready,
                            int devices, std::vector<CopyPiece>* in, std::vector<CopyPiece>* out) {
  const bool convert = plan.compression != Compression::kNone;
  size_t offset = 0;
  for (size_t i : plan.bucket->members) {
    const Tensor& tensor = ready[i].tensor.tensor;
    const size_t count = convert ? tensor.count() : tensor.bytes();
    for (int d = 0; d < devices; ++d) {
      void* data = device_data(ready[i], d);
      uint8_t* place =
          static_cast<uint8_t*>(fusion_buffer(d, plan.slot, 0)) + offset * plan.wire_size;
      in->push_back({data, place, count});
      out->push_back({place, data, count});
    }
    offset += tensor.count();
  }
}

void Executor::copy_plan(const AllreducePlan& plan, std::vector<ReadyTensor>& ready,
                         std::vector<CopyPiece> pieces, bool into) {
  CopyMode mode = CopyMode::kPlain;
  if (plan.compression != Compression::kNone) {
    mode = into ? CopyMode::kToCompressed : CopyMode::kFromCompressed;
  }
  copy(*plan.bucket, ready, std::move(pieces), mode, plan.compression,
       into ? "memcpy in" : "memcpy out");
}

std::vector<Executor::Traffic> Executor::run_allreduces(const std::vector<const Bucket*>& buckets,
                                                        std::vector<ReadyTensor>& ready) {
  if (config_.local_group) return run_hierarchical_allreduces(buckets, ready);
  const std::vector<AllreducePlan> plans = plan_allreduces(buckets, ready, 1, true, true);
  std::vector<Traffic> traffic(plans.size());
  std::vector<std::vector<CopyPiece>> in(plans.size());
  std::vector<std::vector<CopyPiece>> out(plans.size());
  for (size_t k = 0; k < plans.size(); ++k) {
    traffic[k].compressed_bytes = plans[k].total * plans[k].wire_size;
    if (!plans[k].in_place) fused_pieces(plans[k], ready, 1, &in[k], &out[k]);
  }
  const auto copy_in = [&](size_t k) {
    if (!plans[k].in_place) copy_plan(plans[k], ready, std::move(in[k]), /*into=*/true);
  };
  const auto collective = [&](size_t k) {
    const AllreducePlan& plan = plans[k];
    const TensorParams& params = ready[plan.bucket->members[0]].tensor.params;
    const auto start = Timeline::Clock::now();
    if (plan.in_place && plan.bucket->members.size() > 1) {
      // Uncompressed: the members where they are, one ring over all of them, no copies.
      std::vector<BufferView> views;
      for (size_t i : plan.bucket->members) {
        const Tensor& tensor = ready[i].tensor.tensor;
        views.push_back({tensor.data, tensor.count()});
      }
      allreduce_list(ctx_, views, plan.wire, params.op, config_.collective);
    } else {
      void* data = plan.in_place ? ready[plan.bucket->members[0]].tensor.tensor.data
                                 : fusion_buffer(0, plan.slot, 0);
      allreduce(ctx_, data, data, plan.total, plan.wire, params.op, config_.collective);
    }
    mark(*plan.bucket, ready, "allreduce", start);
  };
  const auto copy_out = [&](size_t k) {
    if (!plans[k].in_place) copy_plan(plans[k], ready, std::move(out[k]), /*into=*/false);
  };
  const bool copies = std::any_of(plans.begin(), plans.end(),
                                  [](const AllreducePlan& plan) { return !plan.in_place; });
  if (copies) {
    algo::run_pipelined(plans.size(), copy_in, collective, copy_out);
  } else {
    for (size_t k = 0; k < plans.size(); ++k) collective(k);  // nothing to overlap: no thread
  }
  return traffic;
}

void Executor::run_broadcast(const Bucket& bucket, std::vector<ReadyTensor>& ready) {
  const int root = ready[bucket.members[0]].tensor.params.root;
  if (bucket.members.size() == 1) {
    Tensor& tensor = ready[bucket.members[0]].tensor.tensor;
    const auto start = Timeline::Clock::now();
    broadcast(ctx_, tensor.data, tensor.count(), tensor.dtype, root, config_.collective);
    mark(bucket, ready, "broadcast", start);
    return;
  }
  uint8_t* buffer = static_cast<uint8_t*>(fusion_buffer(0, 0, bucket.bytes));
  std::vector<CopyPiece> in;
  std::vector<CopyPiece> out;
  size_t offset = 0;
  for (size_t i : bucket.members) {
    Tensor& tensor = ready[i].tensor.tensor;
    in.push_back({tensor.data, buffer + offset, tensor.bytes()});
    out.push_back({buffer + offset, tensor.data, tensor.bytes()});
    offset += tensor.bytes();
  }
  const bool is_root = ctx_.rank() == root;
  if (is_root)
    copy(bucket, ready, std::move(in), CopyMode::kPlain, Compression::kNone, "memcpy in");
  const auto start = Timeline::Clock::now();
  broadcast(ctx_, buffer, bucket.bytes, DataType::kUInt8, root, config_.collective);
  mark(bucket, ready, "broadcast", start);
  if (!is_root) {
    copy(bucket, ready, std::move(out), CopyMode::kPlain, Compression::kNone, "memcpy out");
  }
}

// Ranks may contribute different first dimensions: each contribution is padded to the largest,
// gathered, and the padding squeezed out (rank 0's rows first).
void Executor::run_allgather(ReadyTensor& ready) {
  const Tensor& tensor = ready.tensor.tensor;
  const std::vector<int64_t>& rows = ready.response.first_dims;
  const size_t row_elements =
      element_count(std::vector<int64_t>(tensor.shape.begin() + 1, tensor.shape.end()));
  const size_t element = dtype_size(tensor.dtype);
  detail::HandleState& state = *ready.tensor.handle;
  int64_t total_rows = 0;
  for (int64_t r : rows) total_rows += r;
  const int64_t max_rows = *std::max_element(rows.begin(), rows.end());
  state.output_shape = tensor.shape;
  state.output_shape[0] = total_rows;
  state.output.resize(static_cast<size_t>(total_rows) * row_elements * element);

  const auto start = Timeline::Clock::now();
  if (std::all_of(rows.begin(), rows.end(), [&](int64_t r) { return r == rows[0]; })) {
    allgather(ctx_, tensor.data, state.output.data(), tensor.count(), tensor.dtype,
              config_.collective);
  } else {
    const size_t padded = static_cast<size_t>(max_rows) * row_elements;
    uint8_t* buffer = static_cast<uint8_t*>(fusion_buffer(0, 0, padded * element * ctx_.size()));
    uint8_t* mine = buffer + static_cast<size_t>(ctx_.rank()) * padded * element;
    if (tensor.bytes() > 0) std::memcpy(mine, tensor.data, tensor.bytes());
    allgather(ctx_, mine, buffer, padded, tensor.dtype, config_.collective);
    uint8_t* out = state.output.data();
    for (int r = 0; r < ctx_.size(); ++r) {
      const size_t bytes = static_cast<size_t>(rows[r]) * row_elements * element;
      if (bytes > 0) std::memcpy(out, buffer + static_cast<size_t>(r) * padded * element, bytes);
      out += bytes;
    }
  }
  if (timeline_) timeline_->span(ready.tensor.name, "allgather", start, Timeline::Clock::now());
}

}  // namespace ringd::fusion
