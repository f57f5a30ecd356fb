#include "runners/metrics_file.h"

#include <atomic>
#include <cstdio>

#include "common/files.h"
#include "common/logging.h"
#include "runners/bench_config.h"

namespace ringd::runners {
namespace {

// A metric family's HELP and TYPE lines, then one sample line per labels set.
std::string family(const char* name, const char* type, const char* help) {
  return std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::string sample(const char* name, const std::string& labels, double value) {
  char number[64];
  std::snprintf(number, sizeof(number), "%.9g", value);
  return name + labels + " " + number + "\n";
}

std::string gauge(const char* name, const char* type, const char* help, const std::string& labels,
                  double value) {
  return family(name, type, help) + sample(name, labels, value);
}

}  // namespace

std::string bench_metrics_text(const std::vector<BenchRow>& rows, int iters) {
  if (rows.empty()) return "";
  const BenchRow& last = rows.back();
  double bytes_total = 0;
  double wrong_total = 0;
  for (const BenchRow& row : rows) {
    bytes_total += static_cast<double>(row.bytes) * iters;
    if (row.wrong > 0) wrong_total += static_cast<double>(row.wrong);
  }
  const std::string labels = std::string("{collective=\"") + collective_name(last.collective) +
                             "\",transport=\"" + last.transport + "\",ranks=\"" +
                             std::to_string(last.ranks) + "\"}";
  std::string text;
  text += gauge("ringd_bench_bytes_total", "counter",
                "bytes of collective buffers timed so far (size x iterations, per rank)", labels,
                bytes_total);
  text += gauge("ringd_bench_last_bytes", "gauge", "size of the last measured buffer", labels,
                static_cast<double>(last.bytes));
  text += gauge("ringd_bench_time_seconds", "gauge",
                "mean time of one collective at the last size, slowest rank", labels,
                last.time_us * 1e-6);
  text += gauge("ringd_bench_algbw_bytes_per_second", "gauge", "algbw at the last size", labels,
                last.algbw_gbps * 1e9);
  text += gauge("ringd_bench_busbw_bytes_per_second", "gauge", "busbw at the last size", labels,
                last.busbw_gbps * 1e9);
  text += gauge("ringd_bench_wrong_total", "counter", "wrong values found by --check", labels,
                wrong_total);
  return text;
}

std::string train_metrics_text(const TrainMetrics& m) {
  const std::string labels = "{mode=\"" + m.mode + "\",ranks=\"" + std::to_string(m.ranks) + "\"}";
  std::string text;
  text += gauge("ringd_train_steps_total", "counter", "training steps done in this run", labels,
                static_cast<double>(m.steps));
  text += gauge("ringd_train_step_seconds", "gauge", "time of the last step on rank 0", labels,
                m.last_step_seconds);
  text += gauge("ringd_train_samples_total", "counter",
                "samples trained on in this run, over all ranks (rate() gives samples/s)", labels,
                m.samples_total);
  text += gauge("ringd_train_gradient_bytes_total", "counter",
                "bytes of gradients averaged so far (per rank)", labels, m.gradient_bytes_total);
  text += gauge("ringd_train_communication_ratio", "gauge",
                "share of the step time spent blocked in the gradient exchange, 0..1", labels,
                m.communication_ratio);
  if (!m.rank_lag_seconds.empty()) {
    // One family, one sample per rank (HELP and TYPE once).
    text += family("ringd_rank_lag_seconds", "gauge",
                   "how long after the median rank each rank was ready, on average over the "
                   "fusion engine's last 20 cycles (the straggler lags most)");
    for (size_t rank = 0; rank < m.rank_lag_seconds.size(); ++rank) {
      text += sample("ringd_rank_lag_seconds",
                     "{mode=\"" + m.mode + "\",rank=\"" + std::to_string(rank) + "\"}",
                     m.rank_lag_seconds[rank]);
    }
  }
  return text;
}

void publish_metrics(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  try {
    write_file_atomically(path, text);
  } catch (const std::exception& error) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      RINGD_LOG(kWarn) << "RINGD_METRICS_FILE: " << error.what() << " (metrics not published)";
    }
  }
}

}  // namespace ringd::runners
