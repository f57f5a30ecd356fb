#include "runners/replay_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "common/tunables.h"
#include "ringd/collectives.h"
#include "ringd/engine.h"
#include "ringd/error.h"
#include "ringd/hierarchy.h"
#include "ringd/local_group.h"
#include "runners/gpu_group.h"

namespace ringd::runners {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// What one rank measured in one step.
struct LocalStep {
  double step_ms = 0;
  double tail_ms = 0;
  uint64_t cycle_begin = 0;  // engine cycles counted before the step / after it
  uint64_t cycle_end = 0;
  uint64_t rounds = 0;
  uint64_t hits = 0;
  uint64_t buckets = 0;
  uint64_t compressed_bytes = 0;  // this rank's, EngineStats::compressed_bytes
  uint64_t sparse_tensors = 0;
  double one_buffer_ms = 0;  // --paired: this rank's one-buffer allreduce before the step
};

class ReplayRank {
 public:
  ReplayRank(Context& ctx, const ReplayConfig& config, const model::GradientProfile& profile)
      : ctx_(ctx),
        config_(config),
        profile_(profile),
        elements_(profile.total_elements()),
        compression_(config.compression.value_or(parse_compression(tunables().compression))),
        devices_(config.local_devices),
        world_(ctx.size() * devices_) {
    if (config.gpus) {
      group_ = make_gpu_group("bench replay", devices_, compression_);
    } else if (devices_ > 1) {
      group_ = make_cpu_local_group(devices_);
    }
    for (int d = 0; d < devices_; ++d) {
      arenas_.emplace_back(
          static_cast<float*>(std::aligned_alloc(64, (elements_ * 4 / 64 + 1) * 64)));
      if (!arenas_.back()) {
        RINGD_THROW(kIo,
                    "cannot allocate " << elements_ * 4 << " bytes of gradients for device " << d);
      }
      if (config.gpus) {
        gpu_arenas_.push_back(group_->allocate(d, elements_ * 4));
        gpu_tokens_.push_back(group_->allocate(d, sizeof(float)));
      }
    }
    size_t offset = 0;
    for (const model::GradientTensor& t : profile.tensors) {
      tensors_.push_back(
          Tensor{arena(0) + offset, DataType::kFloat32, {static_cast<int64_t>(t.elements)}});
      std::vector<void*> others;
      for (int d = 1; d < devices_; ++d) others.push_back(arena(d) + offset);
      other_devices_.push_back(std::move(others));
      offset += t.elements;
    }
  }

  ReplaySummary run() {
    ReplaySummary summary = describe();
    summary.one_buffer_ms = one_buffer_allreduce_ms();
    Engine engine(ctx_, engine_options());
    const auto schedule = model::backward_schedule(
        profile_, std::chrono::microseconds(std::llround(config_.compute_ms * 1000)),
        config_.spread);
    std::vector<LocalStep> steps;
    const int total = config_.warmup_steps + config_.steps;
    for (int step = 0; step < total; ++step) {
      fill(step);
      double one_buffer_ms = 0;
      if (config_.paired) {
        sync(engine);
        one_buffer_ms = engine_one_buffer_ms(engine);
        fill(step);  // the step starts from the same values as without --paired
      }
      sync(engine);
      LocalStep measured = run_step(engine, schedule);
      measured.one_buffer_ms = one_buffer_ms;
      if (step >= config_.warmup_steps) steps.push_back(measured);
    }
    for (const LocalStep& step : steps) {
      summary.compressed_bytes_per_step += static_cast<double>(step.compressed_bytes);
      summary.sparse_tensors_per_step += static_cast<double>(step.sparse_tensors);
    }
    summary.compressed_bytes_per_step /= config_.steps;
    summary.sparse_tensors_per_step /= config_.steps;
    engine.shutdown();  // every rank does: the Context is this thread's again
    const int64_t wrong = !config_.check                             ? -1
                          : summary.compression == Compression::kDgc ? count_differences()
                                                                     : count_wrong();
    combine(steps, engine.stats(), wrong, summary);
    return summary;
  }

 private:
  struct FreeDeleter {
    void operator()(float* p) const { std::free(p); }
  };

  // Device d's gradients as the engine sees them: GPU memory with --gpus, else the host arena.
  float* arena(int d) const {
    return config_.gpus ? static_cast<float*>(gpu_arenas_[d].get()) : arenas_[d].get();
  }

  ReplaySummary describe() const {
    ReplaySummary s;
    s.profile = profile_.name;
    s.tensors = profile_.tensors.size();
    s.bytes = elements_ * sizeof(float);
    s.ranks = ctx_.size();
    s.transport = ctx_.transport_name();
    s.config = config_;
    const Tunables& t = tunables();
    s.fusion_threshold_bytes =
        config_.fusion ? config_.fusion_threshold_bytes.value_or(t.fusion_threshold_bytes) : 0;
    s.fusion_max_tensor_bytes = config_.fusion_max_tensor_bytes.value_or(t.fusion_max_tensor_bytes);
    s.cache_capacity = config_.cache ? t.cache_capacity : 0;
    s.cycle_time_ms = config_.cycle_time_ms.value_or(t.cycle_time_ms);
    s.compression = compression_;
    return s;
  }

  EngineOptions engine_options() const {
    const ReplaySummary s = describe();
    EngineOptions options;
    options.fusion_threshold_bytes = s.fusion_threshold_bytes;
    options.fusion_max_tensor_bytes = s.fusion_max_tensor_bytes;
    options.cache_capacity = s.cache_capacity;
    options.cycle_time_ms = s.cycle_time_ms;
    options.compression = s.compression;
    options.dgc.sparsity = config_.dgc_sparsity;
    options.dgc.warmup.clear();  // the steady state is what a replay measures
    if (!config_.timeline.empty()) options.timeline_path = config_.timeline;
    options.record_cycles = true;
    options.local_group = group_.get();
    options.hierarchy = hierarchy_options();
    return options;
  }

  HierarchyOptions hierarchy_options() const {
    HierarchyOptions options;
    options.strategy = config_.hierarchy;
    options.check_agreement = false;  // as in the engine: the replay's steps agree by design
    return options;
  }

  std::vector<DeviceBuffer> device_arenas() const {
    std::vector<DeviceBuffer> buffers;
    for (int d = 0; d < devices_; ++d) buffers.push_back({arena(d), d});
    return buffers;
  }

  // Every device's gradients hold its global rank + 1, so any step's result is known in closed
  // form. DGC instead gets fresh values in [-1, 1) every step: its selection on equal values would
  // be neither fast nor what a real gradient looks like.
  void fill(int step) {
    if (compression_ != Compression::kDgc) {
      for (int d = 0; d < devices_; ++d) {
        std::fill(arenas_[d].get(), arenas_[d].get() + elements_,
                  static_cast<float>(ctx_.rank() * devices_ + d + 1));
        if (config_.gpus) group_->upload({arena(d), d}, arenas_[d].get(), elements_ * 4);
      }
      return;
    }
    uint64_t state = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(ctx_.rank() * 65537 + step + 1);
    float* values = arenas_[0].get();  // one device: the flags refuse dgc over several
    for (size_t i = 0; i < elements_; ++i) {
      state ^= state << 13;  // xorshift64
      state ^= state >> 7;
      state ^= state << 17;
      values[i] = static_cast<float>(static_cast<int32_t>(state >> 32)) * (1.0f / 2147483648.0f);
    }
  }

  // --check with DGC: the result is no closed form, but every rank must hold the same bits. Counts
  // the elements where this rank is below the largest value any rank holds (summed over ranks
  // later: 0 when every rank agrees).
  int64_t count_differences() {
    const float* mine = arenas_[0].get();
    std::vector<float> largest(mine, mine + elements_);
    allreduce(ctx_, largest.data(), largest.data(), elements_, DataType::kFloat32, ReduceOp::kMax);
    int64_t different = 0;
    for (size_t i = 0; i < elements_; ++i) different += largest[i] != mine[i];
    return different;
  }

  int64_t count_wrong() {
    for (int d = 0; config_.gpus && d < devices_; ++d) {
      group_->download(arenas_[d].get(), {arena(d), d}, elements_ * 4);
    }
    const double n = world_;
    const double sum = n * (n + 1) / 2;
    const double want = config_.op == ReduceOp::kAvg ? sum / n : sum;
    const double tolerance = compression_ == Compression::kNone ? 1e-6 : 1e-2;
    int64_t wrong = 0;
    for (const auto& arena : arenas_) {
      for (size_t i = 0; i < elements_; ++i) {
        if (std::fabs(arena.get()[i] - want) > tolerance * want) ++wrong;
      }
    }
    return wrong;
  }

  // Best of config_.baseline_iters (after one untimed): the slowest rank's time for one allreduce
  // of every gradient in one buffer (over local devices: one hierarchical allreduce of every
  // device's buffer).
  double one_buffer_allreduce_ms() {
    double best = 0;
    for (int i = 0; i <= config_.baseline_iters; ++i) {
      float token = 1;
      allreduce(ctx_, &token, &token, 1, DataType::kFloat32, ReduceOp::kSum);
      const auto start = Clock::now();
      if (group_) {
        hierarchical_allreduce(ctx_, *group_, device_arenas(), elements_, DataType::kFloat32,
                               config_.op, hierarchy_options());
      } else {
        allreduce(ctx_, arenas_[0].get(), arenas_[0].get(), elements_, DataType::kFloat32,
                  config_.op);
      }
      double ms = ms_between(start, Clock::now());
      allreduce(ctx_, &ms, &ms, 1, DataType::kFloat64, ReduceOp::kMax);
      if (i == 1 || (i > 1 && ms < best)) best = ms;
    }
    return best;
  }

  // Every rank (and device) submits one token and waits for the sum: the ranks start what follows
  // together.
  void sync(Engine& engine) {
    std::vector<float> tokens(static_cast<size_t>(devices_), 1.0f);  // one per device
    std::vector<float*> token_at;
    for (int d = 0; d < devices_; ++d) {
      if (config_.gpus) group_->upload({gpu_tokens_[d].get(), d}, &tokens[d], sizeof(float));
      token_at.push_back(config_.gpus ? static_cast<float*>(gpu_tokens_[d].get()) : &tokens[d]);
    }
    Submission sync;
    sync.name = "replay.sync";
    sync.tensor = Tensor{token_at[0], DataType::kFloat32, {}};
    sync.op = ReduceOp::kSum;
    for (int d = 1; d < devices_; ++d) sync.other_devices.push_back(token_at[d]);
    engine.submit(std::move(sync)).wait();
  }

  // --paired: every gradient byte as ONE tensor through the engine, uncompressed: a bucket of one
  // member runs in place as the one-buffer allreduce (over a group: the hierarchical one) plus
  // its negotiation cycle. This rank's time.
  double engine_one_buffer_ms(Engine& engine) {
    Submission all;
    all.name = "replay.one_buffer";
    all.tensor = Tensor{arena(0), DataType::kFloat32, {static_cast<int64_t>(elements_)}};
    all.op = config_.op;
    all.compression = Compression::kNone;
    for (int d = 1; d < devices_; ++d) all.other_devices.push_back(arena(d));
    const auto start = Clock::now();
    engine.submit(std::move(all)).wait();
    return ms_between(start, Clock::now());
  }

  LocalStep run_step(Engine& engine, const std::vector<model::Emission>& schedule) {
    const EngineStats before = engine.stats();
    std::vector<Handle> handles(tensors_.size());
    const auto start = Clock::now();
    for (const model::Emission& emission : schedule) {
      if (emission.at.count() > 0) std::this_thread::sleep_until(start + emission.at);
      Submission submission;
      submission.name = profile_.tensors[emission.tensor].name;
      submission.tensor = tensors_[emission.tensor];
      submission.op = config_.op;
      submission.other_devices = other_devices_[emission.tensor];
      handles[emission.tensor] = engine.submit(std::move(submission));
    }
    const auto submitted = Clock::now();
    for (Handle& handle : handles) handle.wait();
    const auto end = Clock::now();
    const EngineStats after = engine.stats();
    LocalStep step;
    step.step_ms = ms_between(start, end);
    step.tail_ms = ms_between(submitted, end);
    step.cycle_begin = before.cycles;
    step.cycle_end = after.cycles;
    step.rounds = after.coordinator_rounds - before.coordinator_rounds;
    step.hits = after.cache_hits - before.cache_hits;
    step.buckets = after.buckets - before.buckets;
    step.compressed_bytes = after.compressed_bytes - before.compressed_bytes;
    step.sparse_tensors = after.dgc_sparse_tensors - before.dgc_sparse_tensors;
    return step;
  }

  // Slowest rank per step; per cycle of a step, the negotiation time of the fastest rank (the
  // last to arrive, so its time is the protocol's cost, not waiting for others).
  void combine(const std::vector<LocalStep>& local, const EngineStats& stats, int64_t wrong,
               ReplaySummary& summary) {
    const size_t n = local.size();
    std::vector<double> times;
    std::vector<int64_t> ranges;  // begin, -end: max over ranks = the cycles every rank counted
    std::vector<int64_t> counts;
    for (const LocalStep& step : local) {
      times.insert(times.end(), {step.step_ms, step.tail_ms, step.one_buffer_ms});
      ranges.insert(ranges.end(), {static_cast<int64_t>(step.cycle_begin),
                                   -static_cast<int64_t>(step.cycle_end)});
      counts.insert(counts.end(),
                    {static_cast<int64_t>(step.rounds), static_cast<int64_t>(step.hits),
                     static_cast<int64_t>(step.buckets)});
    }
    allreduce(ctx_, times.data(), times.data(), times.size(), DataType::kFloat64, ReduceOp::kMax);
    allreduce(ctx_, ranges.data(), ranges.data(), ranges.size(), DataType::kInt64, ReduceOp::kMax);
    allreduce(ctx_, counts.data(), counts.data(), counts.size(), DataType::kInt64, ReduceOp::kMax);
    allreduce(ctx_, &wrong, &wrong, 1, DataType::kInt64, ReduceOp::kSum);
    std::vector<double> negotiation;
    for (size_t k = 0; k < n; ++k) {
      for (int64_t c = ranges[2 * k]; c < -ranges[2 * k + 1]; ++c) {
        negotiation.push_back(stats.cycle_log.at(static_cast<size_t>(c)).negotiation_us);
      }
    }
    allreduce(ctx_, negotiation.data(), negotiation.data(), negotiation.size(), DataType::kFloat64,
              ReduceOp::kMin);
    size_t next = 0;
    for (size_t k = 0; k < n; ++k) {
      ReplayStep step;
      step.step_ms = times[3 * k];
      step.tail_ms = times[3 * k + 1];
      step.one_buffer_ms = times[3 * k + 2];
      const int64_t cycles = std::max<int64_t>(0, -ranges[2 * k + 1] - ranges[2 * k]);
      step.cycles = static_cast<uint64_t>(cycles);
      for (int64_t c = 0; c < cycles; ++c) step.negotiation_ms += negotiation[next++] / 1000;
      step.coordinator_rounds = static_cast<uint64_t>(counts[3 * k]);
      step.cache_hits = static_cast<uint64_t>(counts[3 * k + 1]);
      step.buckets = static_cast<uint64_t>(counts[3 * k + 2]);
      summary.steps.push_back(step);
    }
    summary.wrong = wrong;
  }

  Context& ctx_;
  const ReplayConfig& config_;
  const model::GradientProfile& profile_;
  const size_t elements_;
  const Compression compression_;      // --compression, else RINGD_COMPRESSION
  const int devices_;                  // --local-devices
  const int world_;                    // nodes x devices
  std::unique_ptr<LocalGroup> group_;  // when config_.over_group()
  std::vector<std::unique_ptr<float, FreeDeleter>> arenas_;  // every gradient, per device
  // --gpus: the gradients in each GPU's memory (arenas_ then stage fill and check), and each
  // GPU's token of the step's sync
  std::vector<std::shared_ptr<void>> gpu_arenas_;
  std::vector<std::shared_ptr<void>> gpu_tokens_;
  std::vector<Tensor> tensors_;                    // on device 0
  std::vector<std::vector<void*>> other_devices_;  // per tensor: devices 1..L-1
};

}  // namespace

ReplaySummary run_replay_rank(Context& ctx, const ReplayConfig& config,
                              const model::GradientProfile& profile) {
  return ReplayRank(ctx, config, profile).run();
}

}  // namespace ringd::runners
