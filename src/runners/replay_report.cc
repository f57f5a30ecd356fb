#include "runners/replay_report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ringd::runners {
namespace {

std::string printf_string(const char* format, auto... args) {
  char line[512];
  std::snprintf(line, sizeof line, format, args...);
  return line;
}

template <typename Field>
double mean_of(const std::vector<ReplayStep>& steps, Field field) {
  if (steps.empty()) return 0;
  double total = 0;
  for (const ReplayStep& step : steps) total += static_cast<double>(field(step));
  return total / static_cast<double>(steps.size());
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

double ReplaySummary::mean_step_ms() const {
  return mean_of(steps, [](const ReplayStep& s) { return s.step_ms; });
}
double ReplaySummary::mean_negotiation_ms() const {
  return mean_of(steps, [](const ReplayStep& s) { return s.negotiation_ms; });
}
double ReplaySummary::ideal_ms() const { return std::max(config.compute_ms, one_buffer_ms); }

std::optional<ReplaySummary::Paired> ReplaySummary::paired() const {
  if (!config.paired || steps.empty()) return std::nullopt;
  std::vector<double> one_buffer, step_ms, ratios;
  for (const ReplayStep& step : steps) {
    one_buffer.push_back(step.one_buffer_ms);
    step_ms.push_back(step.step_ms);
    ratios.push_back(step.one_buffer_ms > 0 ? step.step_ms / step.one_buffer_ms : 0.0);
  }
  Paired p;
  p.one_buffer_median_ms = median_of(one_buffer);
  p.step_median_ms = median_of(step_ms);
  p.ratio_median = median_of(ratios);
  p.ratio_min = *std::min_element(ratios.begin(), ratios.end());
  p.ratio_max = *std::max_element(ratios.begin(), ratios.end());
  return p;
}

std::string format_replay_text(const ReplaySummary& s) {
  std::ostringstream os;
  const int devices = s.config.local_devices;
  const bool grouped = s.config.over_group();
  const std::string ranks =
      grouped ? printf_string("%d nodes x %d %s device%s = %d ranks (%s, hierarchy %s)", s.ranks,
                              devices, s.config.gpus ? "GPU" : "CPU", devices > 1 ? "s" : "",
                              s.ranks * devices, s.transport.c_str(),
                              hierarchy_name(s.config.hierarchy))
              : printf_string("%d ranks (%s)", s.ranks, s.transport.c_str());
  os << printf_string(
      "# ringd bench replay: profile %s (%zu tensors, %.1f MiB float per step%s), %s\n",
      s.profile.c_str(), s.tensors, static_cast<double>(s.bytes) / (1 << 20),
      devices > 1 ? " per device" : "", ranks.c_str());
  os << printf_string("# compute %.1f ms per step (%s spread), %d steps after %d warmup, op %s\n",
                      s.config.compute_ms, model::compute_spread_name(s.config.spread),
                      s.config.steps, s.config.warmup_steps, reduce_op_name(s.config.op));
  const double max_tensor = static_cast<double>(
      s.fusion_max_tensor_bytes == 0 ? s.fusion_threshold_bytes : s.fusion_max_tensor_bytes);
  const std::string fusion =
      s.fusion_threshold_bytes == 0
          ? std::string("off")
          : printf_string("%.1f MiB buffers of tensors up to %.2f MiB",
                          static_cast<double>(s.fusion_threshold_bytes) / (1 << 20),
                          max_tensor / (1 << 20));
  os << printf_string("# fusion %s, response cache %zu, cycle time %.2f ms, wire %s\n",
                      fusion.c_str(), s.cache_capacity, s.cycle_time_ms,
                      compression_name(s.compression));
  const std::optional<ReplaySummary::Paired> paired = s.paired();
  os << "#  step   time(ms)   tail(ms)  negot(ms)  cycles  rounds  cached  buckets"
     << (paired ? "  1-buffer(ms)\n" : "\n");
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const ReplayStep& step = s.steps[i];
    os << printf_string("%7zu %10.2f %10.2f %10.3f %7llu %7llu %7llu %8llu", i + 1, step.step_ms,
                        step.tail_ms, step.negotiation_ms,
                        static_cast<unsigned long long>(step.cycles),
                        static_cast<unsigned long long>(step.coordinator_rounds),
                        static_cast<unsigned long long>(step.cache_hits),
                        static_cast<unsigned long long>(step.buckets));
    os << (paired ? printf_string(" %13.2f\n", step.one_buffer_ms) : std::string("\n"));
  }
  const double mean = s.mean_step_ms();
  double low = mean;
  double high = mean;
  for (const ReplayStep& step : s.steps) {
    low = std::min(low, step.step_ms);
    high = std::max(high, step.step_ms);
  }
  os << printf_string(
      "# one-buffer %sallreduce of %.1f MiB: %.2f ms; ideal step max(compute, that) = %.2f ms\n",
      grouped ? "hierarchical " : "", static_cast<double>(s.bytes) / (1 << 20), s.one_buffer_ms,
      s.ideal_ms());
  os << printf_string("# step time: mean %.2f ms (min %.2f, max %.2f) = %.3f x ideal\n", mean, low,
                      high, s.ideal_ms() > 0 ? mean / s.ideal_ms() : 0.0);
  if (paired) {
    os << printf_string(
        "# paired: the one-buffer %sallreduce through the engine before each step, median %.2f "
        "ms; step median %.2f ms; step / its one-buffer: median %.3f (min %.3f, max %.3f)\n",
        grouped ? "hierarchical " : "", paired->one_buffer_median_ms, paired->step_median_ms,
        paired->ratio_median, paired->ratio_min, paired->ratio_max);
  }
  if (s.config.compute_ms > 0) {
    os << printf_string("# scaling efficiency (compute-only step / measured step): %.1f%%\n",
                        100.0 * s.config.compute_ms / mean);
  }
  os << printf_string("# gradient bytes per second: %.3f GB/s\n",
                      mean > 0 ? static_cast<double>(s.bytes) / (mean * 1e6) : 0.0);
  os << printf_string(
      "# negotiation: %.3f ms per step at the fastest rank of each cycle = %.2f%% of the step\n",
      s.mean_negotiation_ms(), mean > 0 ? 100.0 * s.mean_negotiation_ms() / mean : 0.0);
  if (s.compression != Compression::kNone && s.compressed_bytes_per_step > 0) {
    os << printf_string("# sent per rank per step: %.3f MiB of %.1f MiB (%.1f x less)%s\n",
                        s.compressed_bytes_per_step / (1 << 20),
                        static_cast<double>(s.bytes) / (1 << 20),
                        static_cast<double>(s.bytes) / s.compressed_bytes_per_step,
                        s.compression == Compression::kDgc
                            ? printf_string("; %.0f of %zu tensors as (index, value) pairs",
                                            s.sparse_tensors_per_step, s.tensors)
                                  .c_str()
                            : "");
    os << printf_string("# step vs the dense one-buffer allreduce: %.2f x faster\n",
                        mean > 0 ? s.one_buffer_ms / mean : 0.0);
  }
  if (s.wrong >= 0) {
    os << "# check: " << s.wrong
       << (s.compression == Compression::kDgc ? " values that differ between ranks\n"
                                              : " wrong values\n");
  }
  return os.str();
}

std::string format_replay_json(const ReplaySummary& s) {
  nlohmann::json steps = nlohmann::json::array();
  for (const ReplayStep& step : s.steps) {
    steps.push_back({{"step_ms", step.step_ms},
                     {"tail_ms", step.tail_ms},
                     {"negotiation_ms", step.negotiation_ms},
                     {"cycles", step.cycles},
                     {"coordinator_rounds", step.coordinator_rounds},
                     {"cache_hits", step.cache_hits},
                     {"buckets", step.buckets}});
    if (s.config.paired) steps.back()["one_buffer_ms"] = step.one_buffer_ms;
  }
  const double mean = s.mean_step_ms();
  nlohmann::json json = {
      {"bench", "replay"},
      {"profile", s.profile},
      {"tensors", s.tensors},
      {"bytes", s.bytes},
      {"ranks", s.ranks},
      {"transport", s.transport},
      {"local_devices", s.config.local_devices},
      {"gpus", s.config.gpus},
      {"hierarchy", s.config.over_group() ? hierarchy_name(s.config.hierarchy) : "none"},
      {"compute_ms", s.config.compute_ms},
      {"spread", model::compute_spread_name(s.config.spread)},
      {"op", reduce_op_name(s.config.op)},
      {"fusion_threshold_bytes", s.fusion_threshold_bytes},
      {"fusion_max_tensor_bytes", s.fusion_max_tensor_bytes},
      {"cache_capacity", s.cache_capacity},
      {"cycle_time_ms", s.cycle_time_ms},
      {"compression", compression_name(s.compression)},
      {"one_buffer_ms", s.one_buffer_ms},
      {"compressed_bytes_per_step", s.compressed_bytes_per_step},
      {"sparse_tensors_per_step", s.sparse_tensors_per_step},
      {"ideal_ms", s.ideal_ms()},
      {"mean_step_ms", mean},

      {"bytes_per_s", mean > 0 ? static_cast<double>(s.bytes) / (mean / 1e3) : 0.0},
      {"negotiation_ms", s.mean_negotiation_ms()},
      {"negotiation_share", mean > 0 ? s.mean_negotiation_ms() / mean : 0.0},
      {"wrong", s.wrong},
      {"steps", steps},
  };
  // Without compute there is no compute-only step to compare with.
  json["scaling_efficiency"] = nullptr;
  if (s.config.compute_ms > 0 && mean > 0) json["scaling_efficiency"] = s.config.compute_ms / mean;
  if (const std::optional<ReplaySummary::Paired> p = s.paired()) {
    json["paired"] = {{"one_buffer_median_ms", p->one_buffer_median_ms},
                      {"step_median_ms", p->step_median_ms},
                      {"ratio_median", p->ratio_median},
                      {"ratio_min", p->ratio_min},
                      {"ratio_max", p->ratio_max}};
  }
  return json.dump();
}

}  // namespace ringd::runners
