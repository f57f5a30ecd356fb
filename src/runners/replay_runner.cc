#include "runners/replay_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "common/tunables.h"
#include "ringd/collectives.h"
#include "ringd/engine.h"
#include "ringd/error.h"

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
};

class ReplayRank {
 public:
  ReplayRank(Context& ctx, const ReplayConfig& config, const model::GradientProfile& profile)
      : ctx_(ctx),
        config_(config),
        profile_(profile),
        elements_(profile.total_elements()),
        compression_(config.compression.value_or(parse_compression(tunables().compression))) {
    arena_.reset(static_cast<float*>(std::aligned_alloc(64, (elements_ * 4 / 64 + 1) * 64)));
    if (!arena_) RINGD_THROW(kIo, "cannot allocate " << elements_ * 4 << " bytes of gradients");
    size_t offset = 0;
    for (const model::GradientTensor& t : profile.tensors) {
      tensors_.push_back(
          Tensor{arena_.get() + offset, DataType::kFloat32, {static_cast<int64_t>(t.elements)}});
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
    EngineStats timed_from;
    for (int step = 0; step < total; ++step) {
      if (step == config_.warmup_steps) timed_from = engine.stats();
      fill(step);
      float token = 1;
      engine.allreduce_async("replay.sync", {&token, DataType::kFloat32, {}}, ReduceOp::kSum)
          .wait();
      const LocalStep measured = run_step(engine, schedule);
      if (step >= config_.warmup_steps) steps.push_back(measured);
    }
    const EngineStats timed_to = engine.stats();
    summary.compressed_bytes_per_step =
        static_cast<double>(timed_to.compressed_bytes - timed_from.compressed_bytes) /
        config_.steps;
    summary.sparse_tensors_per_step =
        static_cast<double>(timed_to.dgc_sparse_tensors - timed_from.dgc_sparse_tensors) /
        config_.steps;
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
    return options;
  }

  // Every rank's gradients hold rank + 1, so any step's result is known in closed form. DGC
  // instead gets fresh values in [-1, 1) every step: its selection on equal values would be
  // neither fast nor what a real gradient looks like.
  void fill(int step) {
    if (compression_ != Compression::kDgc) {
      std::fill(arena_.get(), arena_.get() + elements_, static_cast<float>(ctx_.rank() + 1));
      return;
    }
    uint64_t state = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(ctx_.rank() * 65537 + step + 1);
    float* values = arena_.get();
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
    std::vector<float> largest(arena_.get(), arena_.get() + elements_);
    allreduce(ctx_, largest.data(), largest.data(), elements_, DataType::kFloat32, ReduceOp::kMax);
    int64_t different = 0;
    for (size_t i = 0; i < elements_; ++i) different += largest[i] != arena_.get()[i];
    return different;
  }

  int64_t count_wrong() const {
    const double n = ctx_.size();
    const double sum = n * (n + 1) / 2;
    const double want = config_.op == ReduceOp::kAvg ? sum / n : sum;
    const double tolerance = compression_ == Compression::kNone ? 1e-6 : 1e-2;
    int64_t wrong = 0;
    for (size_t i = 0; i < elements_; ++i) {
      if (std::fabs(arena_.get()[i] - want) > tolerance * want) ++wrong;
    }
    return wrong;
  }

  // Best of config_.baseline_iters (after one untimed): the slowest rank's time for one allreduce
  // of every gradient in one buffer.
  double one_buffer_allreduce_ms() {
    double best = 0;
    for (int i = 0; i <= config_.baseline_iters; ++i) {
      float token = 1;
      allreduce(ctx_, &token, &token, 1, DataType::kFloat32, ReduceOp::kSum);
      const auto start = Clock::now();
      allreduce(ctx_, arena_.get(), arena_.get(), elements_, DataType::kFloat32, config_.op);
      double ms = ms_between(start, Clock::now());
      allreduce(ctx_, &ms, &ms, 1, DataType::kFloat64, ReduceOp::kMax);
      if (i == 1 || (i > 1 && ms < best)) best = ms;
    }
    return best;
  }

  LocalStep run_step(Engine& engine, const std::vector<model::Emission>& schedule) {
    const EngineStats before = engine.stats();
    std::vector<Handle> handles(tensors_.size());
    const auto start = Clock::now();
    for (const model::Emission& emission : schedule) {
      if (emission.at.count() > 0) std::this_thread::sleep_until(start + emission.at);
      handles[emission.tensor] = engine.allreduce_async(profile_.tensors[emission.tensor].name,
                                                        tensors_[emission.tensor], config_.op);
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
      times.insert(times.end(), {step.step_ms, step.tail_ms});
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
      step.step_ms = times[2 * k];
      step.tail_ms = times[2 * k + 1];
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
  const Compression compression_;  // --compression, else RINGD_COMPRESSION
  std::unique_ptr<float, FreeDeleter> arena_;
  std::vector<Tensor> tensors_;
};

}  // namespace

ReplaySummary run_replay_rank(Context& ctx, const ReplayConfig& config,
                              const model::GradientProfile& profile) {
  return ReplayRank(ctx, config, profile).run();
}

}  // namespace ringd::runners
