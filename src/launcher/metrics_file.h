// The file through which a run started by `ringd launch` reports to its pod's agent: Prometheus
// text that `ringd agent` appends to /metrics (docs/launcher.md). Rank 0 writes it, because rank 0
// is the one that knows the job's figures (the slowest rank's time); RINGD_METRICS_FILE says where
// (unset: nothing is written). Each write replaces the file atomically, so a scrape never sees half
// of one.
#pragma once

#include <string>
#include <vector>

#include "launcher/bench_report.h"

namespace ringd::launcher {

// ringd_bench_* gauges and counters for the rows measured so far: bytes moved, the last size's
// time, algbw and busbw, and the wrong values found by --check.
std::string bench_metrics_text(const std::vector<BenchRow>& rows, int iters);

// Replaces `path` with `text` atomically; logs a warning (once) instead of failing the run when
// the path cannot be written.
void publish_metrics(const std::string& path, const std::string& text);

}  // namespace ringd::launcher
