// EngineOptions with every unset field filled from the RINGD_* tunables, checked once when the
// engine starts.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "ringd/engine.h"

namespace ringd::fusion {

struct EngineConfig {
  std::chrono::microseconds cycle_time{1000};
  size_t fusion_threshold_bytes = 0;
  size_t fusion_max_tensor_bytes = 0;  // 0 = fuse tensors of any size
  size_t cache_capacity = 0;
  double stall_warning_s = 0;
  double stall_shutdown_s = 0;
  std::string timeline_path;  // "" = this rank writes no timeline
  Compression compression = Compression::kNone;
  int copy_threads = 1;
  DgcOptions dgc;
  CollectiveOptions collective;
  // An idle engine still joins a cycle this often, so ranks that wait for it never wait longer
  // than this (well inside RINGD_TIMEOUT) and the stall inspector keeps seeing every rank.
  std::chrono::milliseconds heartbeat{1000};
  std::function<void(const StallReport&)> on_stall;
  bool record_cycles = false;
  LocalGroup* local_group = nullptr;  // EngineOptions::local_group
  HierarchyOptions hierarchy;         // inter_node = collective, no per-call agreement check
  int local_devices() const { return local_group ? local_group->size() : 1; }
};

// Throws ringd::Error(kInvalidArgument) naming the option for values out of range.
EngineConfig resolve_engine_config(const EngineOptions& options, const Context& ctx);

}  // namespace ringd::fusion
