// The results of `ringd bench replay`, as rank 0 prints them (text) and appends them (--json).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runners/replay_config.h"

namespace ringd::runners {

struct ReplayStep {
  double step_ms = 0;         // slowest rank: first gradient's compute start -> last handle done
  double tail_ms = 0;         // slowest rank: last gradient submitted -> last handle done
  double negotiation_ms = 0;  // summed over the step's cycles, each at its fastest rank
  uint64_t cycles = 0;
  uint64_t coordinator_rounds = 0;
  uint64_t cache_hits = 0;
  uint64_t buckets = 0;
  // --paired: the slowest rank's one-buffer allreduce through the engine just before this step
  // (0 without --paired)
  double one_buffer_ms = 0;
};

struct ReplaySummary {
  std::string profile;
  size_t tensors = 0;
  size_t bytes = 0;  // one step's gradients
  int ranks = 0;
  std::string transport;
  ReplayConfig config;
  size_t fusion_threshold_bytes = 0;   // as the engine ran (0 = off)
  size_t fusion_max_tensor_bytes = 0;  // larger tensors ran alone (0 = any size fused)
  size_t cache_capacity = 0;
  double cycle_time_ms = 0;
  Compression compression = Compression::kNone;
  double one_buffer_ms = 0;  // one allreduce of every gradient byte in one buffer (slowest rank)
  // Per timed step, what each rank contributed after compression (EngineStats::compressed_bytes)
  // and the DGC tensors that went as pairs.
  double compressed_bytes_per_step = 0;
  double sparse_tensors_per_step = 0;
  std::vector<ReplayStep> steps;  // the timed steps
  int64_t wrong = -1;             // --check: wrong values over all ranks (-1 = not checked)

  double ideal_ms() const;
  double mean_step_ms() const;
  double mean_negotiation_ms() const;

  // --paired: every step against the one-buffer allreduce timed just before it. Medians: on a
  // host whose speed drifts, both sides of a pair see the same host, and one slow step moves no
  // median.
  struct Paired {
    double one_buffer_median_ms = 0;
    double step_median_ms = 0;
    double ratio_median = 0;  // of step / its one-buffer, per step
    double ratio_min = 0;
    double ratio_max = 0;
  };
  std::optional<Paired> paired() const;  // nullopt without --paired or steps
};

std::string format_replay_text(const ReplaySummary& summary);
// One line of JSON (no newline).
std::string format_replay_json(const ReplaySummary& summary);

}  // namespace ringd::runners
