// The file through which a run started by `ringd launch` reports to its pod's agent: Prometheus
// text that `ringd agent` appends to /metrics (docs/launcher.md). Rank 0 writes it, because rank 0
// is the one that knows the job's figures (the slowest rank's time); RINGD_METRICS_FILE says where
// (unset: nothing is written). Each write replaces the file atomically, so a scrape never sees half
// of one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runners/bench_report.h"

namespace ringd::runners {

// ringd_bench_* gauges and counters for the rows measured so far: bytes moved, the last size's
// time, algbw and busbw, and the wrong values found by --check.
std::string bench_metrics_text(const std::vector<BenchRow>& rows, int iters);

// What a training run has done so far (rank 0's view: its step times include waiting for the
// slowest rank's gradients).
struct TrainMetrics {
  std::string mode;  // allreduce | ps
  int ranks = 1;
  int64_t steps = 0;  // steps done in this run
  double last_step_seconds = 0;
  double samples_total = 0;              // samples trained on in this run, over all ranks
  double gradient_bytes_total = 0;       // bytes of gradients averaged so far (per rank)
  double communication_ratio = 0;        // blocked in the gradient exchange / step time
  std::vector<double> rank_lag_seconds;  // EngineStats::rank_lag_s (allreduce mode), by rank
};
// ringd_train_* gauges and counters of `metrics`.
std::string train_metrics_text(const TrainMetrics& metrics);

// Replaces `path` with `text` atomically; logs a warning (once) instead of failing the run when
// the path cannot be written.
void publish_metrics(const std::string& path, const std::string& text);

}  // namespace ringd::runners
