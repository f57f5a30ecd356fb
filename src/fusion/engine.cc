// Engine: the submission side. Checks each submission, reserves its name, queues it for the
// background thread (engine_loop.cc) and returns its Handle.
#include "ringd/engine.h"

#include <algorithm>
#include <set>

#include "allreduce/hierarchy_steps.h"
#include "fusion/engine_impl.h"
#include "ringd/error.h"

namespace ringd {

using fusion::PendingTensor;
using fusion::TensorParams;

size_t Tensor::count() const { return fusion::element_count(shape); }

const char* compression_name(Compression compression) {
  switch (compression) {
    case Compression::kNone: return "none";
    case Compression::kFp16: return "fp16";
    case Compression::kBf16: return "bf16";
    case Compression::kDgc: return "dgc";
  }
  return "?";
}

Compression parse_compression(const std::string& text) {
  if (text == "none") return Compression::kNone;
  if (text == "fp16" || text == "half") return Compression::kFp16;
  if (text == "bf16" || text == "bfloat16") return Compression::kBf16;
  if (text == "dgc") return Compression::kDgc;
  RINGD_THROW(kInvalidArgument, "unknown compression '" << text << "'; valid: none fp16 bf16 dgc");
}

namespace {

// Throws kInvalidArgument, naming the rank and the tensor, for submissions no rank could run.
// `devices`: the engine's local devices (1 without a group); broadcast roots count devices.
TensorParams checked_params(const Submission& s, int rank, int size, int devices,
                            Compression default_wire) {
  RINGD_CHECK_ARG(!s.name.empty(), "rank " << rank << ": a tensor needs a non-empty name");
  const auto where = [&] { return "rank " + std::to_string(rank) + ": tensor '" + s.name + "': "; };
  for (int64_t dim : s.tensor.shape) {
    RINGD_CHECK_ARG(dim >= 0, where() << "negative dimension " << dim << " in shape "
                                      << fusion::describe_shape(s.tensor.shape));
  }
  RINGD_CHECK_ARG(s.tensor.data != nullptr || s.tensor.count() == 0,
                  where() << "null data for " << s.tensor.count() << " elements");
  RINGD_CHECK_ARG(s.other_devices.size() == static_cast<size_t>(devices - 1),
                  where() << s.other_devices.size() + 1 << " device buffer(s) for an engine over "
                          << devices << " local device(s): pass tensor.data for device 0 and "
                          << "other_devices for devices 1.." << devices - 1);
  for (size_t d = 0; d < s.other_devices.size(); ++d) {
    RINGD_CHECK_ARG(
        s.other_devices[d] != nullptr || s.tensor.count() == 0,
        where() << "null data on device " << d + 1 << " for " << s.tensor.count() << " elements");
  }
  TensorParams params;
  params.kind = s.kind;
  params.dtype = s.tensor.dtype;
  params.shape = s.tensor.shape;
  switch (s.kind) {
    case CollectiveKind::kAllreduce:
      RINGD_CHECK_ARG(reduce_op_supported(s.tensor.dtype, s.op),
                      where() << "op " << reduce_op_name(s.op) << " is not defined for "
                              << dtype_name(s.tensor.dtype)
                              << " (avg needs a floating-point type)");
      params.op = s.op;
      RINGD_CHECK_ARG(devices == 1 || s.compression != Compression::kDgc,
                      where() << "dgc compression does not run over local devices yet (" << devices
                              << " here); compress with none, fp16 or bf16");
      if (s.tensor.dtype == DataType::kFloat32) {
        params.compression = s.compression.value_or(default_wire);
        const bool sums = s.op == ReduceOp::kSum || s.op == ReduceOp::kAvg;
        // DGC as the engine's default leaves min/max/prod alone; asked for by name, it is an error.
        if (params.compression == Compression::kDgc && !sums) {
          RINGD_CHECK_ARG(!s.compression.has_value(),
                          where() << "dgc compression sums or averages; op " << reduce_op_name(s.op)
                                  << " needs compression none");
          params.compression = Compression::kNone;
        }
      }
      break;
    case CollectiveKind::kBroadcast:
      RINGD_CHECK_ARG(s.root >= 0 && s.root < size * devices,
                      where() << "broadcast root " << s.root << " is not a rank of this job (size "
                              << size * devices << (devices > 1 ? ": nodes x local devices" : "")
                              << ")");
      params.root = s.root;
      break;
    case CollectiveKind::kAllgather:
      RINGD_CHECK_ARG(devices == 1, where() << "allgather does not run over local devices yet ("
                                            << devices << " here)");
      RINGD_CHECK_ARG(!s.tensor.shape.empty(),
                      where() << "allgather needs at least one dimension (rows are gathered along "
                                 "the first)");
      break;
  }
  return params;
}

}  // namespace

Engine::Impl::Impl(Context& context, const EngineOptions& options)
    : ctx(context), config(fusion::resolve_engine_config(options, context)) {
  if (config.local_group && ctx.size() > 1) {
    // Before the thread owns the Context: every node must drive as many devices.
    algo::check_agreement(ctx, "engine over local devices",
                          {{"local devices", config.local_devices()}}, config.collective);
  }
  if (!config.timeline_path.empty()) {
    timeline = std::make_unique<fusion::Timeline>(config.timeline_path, ctx.rank());
  }
  CollectiveOptions flag_options = config.collective;
  flag_options.algorithm = AllreduceAlgorithm::kAuto;
  controller = std::make_unique<fusion::Controller>(
      ctx, config.cache_capacity, flag_options,
      std::make_unique<fusion::StallInspector>(ctx.rank(), config.stall_warning_s,
                                               config.stall_shutdown_s, config.on_stall),
      waits, [this](const fusion::PendingTable& table, fusion::RankState& state) {
        describe(table, state);
      });
  executor = std::make_unique<fusion::Executor>(ctx, config, timeline.get());
  thread = std::thread([this] { run(); });
}

Engine::Impl::~Impl() { shutdown("", false); }

uint64_t Engine::Impl::done_count(const std::string& name) const {
  const auto it = done_by_name.find(name);
  return it == done_by_name.end() ? 0 : it->second;
}

void Engine::Impl::describe(const fusion::PendingTable& table, fusion::RankState& state) {
  std::lock_guard<std::mutex> lock(mutex);
  state.done = stats.tensors_done;
  for (const auto& [name, tensor] : table) state.pending.emplace_back(name, done_count(name));
  // Submitted since this cycle began: pending too (a submitter that then waits is blocked).
  for (const PendingTensor& tensor : incoming) {
    state.pending.emplace_back(tensor.name, done_count(tensor.name));
  }
  if (state.shutting_down) {
    state.reason = stop_reason.empty()
                       ? "Engine::shutdown() or the engine's destructor ran, with no reason given"
                       : stop_reason;
    state.failed = stop_failed;
    state.done_by_name.assign(done_by_name.begin(), done_by_name.end());
  }
}

std::vector<Handle> Engine::Impl::submit(std::vector<Submission> members,
                                         const std::string& group) {
  // Before any lock: the parent's threads may have held them when it forked.
  if (owner.inherited()) RINGD_THROW(kInvalidArgument, owner.child_message(ctx.rank()));
  std::vector<PendingTensor> tensors;
  std::set<std::string> names;
  for (Submission& member : members) {
    PendingTensor tensor;
    tensor.params =
        checked_params(member, ctx.rank(), ctx.size(), config.local_devices(), config.compression);
    if (!group.empty()) {
      tensor.params.group = group;
      tensor.params.group_size = static_cast<uint32_t>(members.size());
    }
    RINGD_CHECK_ARG(names.insert(member.name).second,
                    "rank " << ctx.rank() << ": tensor '" << member.name
                            << "' appears twice in group '" << group << "'");
    tensor.name = member.name;
    tensor.tensor = member.tensor;
    tensor.other_devices = std::move(member.other_devices);
    tensor.handle =
        std::make_shared<detail::HandleState>(member.name, std::move(member.callback), waits);
    tensors.push_back(std::move(tensor));
  }
  waits->note_submitter();
  std::vector<Handle> handles;
  const auto now = fusion::Clock::now();
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (stopped) std::rethrow_exception(stopped);
    for (const PendingTensor& tensor : tensors) {
      RINGD_CHECK_ARG(!in_flight.count(tensor.name),
                      "rank " << ctx.rank() << ": tensor '" << tensor.name
                              << "' is already in flight on this rank (submitted, not yet "
                                 "complete); wait for its handle before submitting the name "
                                 "again, or give each tensor its own name");
    }
    const size_t bytes_before = incoming_bytes;
    for (PendingTensor& tensor : tensors) {
      in_flight.insert(tensor.name);
      tensor.seq = next_seq++;
      tensor.submitted = now;
      incoming_bytes += tensor.tensor.bytes();
      handles.emplace_back(tensor.handle);
      incoming.push_back(std::move(tensor));
    }
    const size_t threshold = config.fusion_threshold_bytes;
    notify =
        idle_waiting || (threshold > 0 && bytes_before < threshold && incoming_bytes >= threshold);
  }
  if (notify) wake.notify_one();
  if (timeline) {
    for (const Handle& handle : handles) timeline->instant(handle.name(), "submitted", now);
  }
  return handles;
}

void Engine::Impl::shutdown(const std::string& reason, bool failed) {
  if (owner.inherited()) return;  // the parent's engine: its thread does not exist here
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!stop_requested) {
      stop_reason = reason;
      stop_failed = failed;
    }
    stop_requested = true;
  }
  wake.notify_one();
  if (!thread.joinable() || thread.get_id() == std::this_thread::get_id()) return;
  thread.join();
}

Engine::Engine(Context& ctx, const EngineOptions& options)
    : impl_(std::make_unique<Impl>(ctx, options)) {}

Engine::~Engine() {
  // In a forked child the parent's engine is left alone: its thread and locks are not ours.
  if (impl_->owner.inherited()) {
    (void)impl_.release();  // NOLINT(bugprone-unused-return-value): leaked on purpose
    return;
  }
  impl_->shutdown("", false);
}

Handle Engine::allreduce_async(std::string name, const Tensor& tensor, ReduceOp op,
                               Callback callback) {
  Submission s;
  s.name = std::move(name);
  s.kind = CollectiveKind::kAllreduce;
  s.tensor = tensor;
  s.op = op;
  s.callback = std::move(callback);
  return submit(std::move(s));
}

Handle Engine::broadcast_async(std::string name, const Tensor& tensor, int root,
                               Callback callback) {
  Submission s;
  s.name = std::move(name);
  s.kind = CollectiveKind::kBroadcast;
  s.tensor = tensor;
  s.root = root;
  s.callback = std::move(callback);
  return submit(std::move(s));
}

Handle Engine::allgather_async(std::string name, const Tensor& tensor, Callback callback) {
  Submission s;
  s.name = std::move(name);
  s.kind = CollectiveKind::kAllgather;
  s.tensor = tensor;
  s.callback = std::move(callback);
  return submit(std::move(s));
}

Handle Engine::submit(Submission submission) {
  std::vector<Submission> one;
  one.push_back(std::move(submission));
  return impl_->submit(std::move(one), "").front();
}

std::vector<Handle> Engine::submit_group(const std::string& group,
                                         std::vector<Submission> members) {
  RINGD_CHECK_ARG(!group.empty(), "rank " << impl_->ctx.rank() << ": a group needs a name");
  if (members.empty()) return {};
  return impl_->submit(std::move(members), group);
}

void Engine::shutdown(const std::string& reason, bool failed) { impl_->shutdown(reason, failed); }

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

void Engine::set_epoch(int epoch) { impl_->executor->set_epoch(epoch); }

void Engine::set_dgc_options(const DgcOptions& options) {
  impl_->executor->set_dgc_options(options);
}

int Engine::rank() const { return impl_->ctx.rank(); }
int Engine::size() const { return impl_->ctx.size(); }
int Engine::local_devices() const { return impl_->config.local_devices(); }

}  // namespace ringd
