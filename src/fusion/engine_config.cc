#include "fusion/engine_config.h"

#include <algorithm>
#include <thread>

#include "common/tunables.h"
#include "compression/dgc_options.h"
#include "ringd/error.h"

namespace ringd::fusion {
namespace {

// "timeline.json" -> rank 0 only; "timeline.%r.json" -> every rank, "%r" = its rank.
std::string timeline_for_rank(const std::string& path, int rank) {
  const size_t marker = path.find("%r");
  if (marker == std::string::npos) return rank == 0 ? path : "";
  std::string resolved = path;
  resolved.replace(marker, 2, std::to_string(rank));
  return resolved;
}

}  // namespace

EngineConfig resolve_engine_config(const EngineOptions& options, const Context& ctx) {
  const Tunables& t = tunables();
  EngineConfig config;
  const double cycle_ms = options.cycle_time_ms.value_or(t.cycle_time_ms);
  RINGD_CHECK_ARG(cycle_ms >= 0 && cycle_ms <= 10000,
                  "rank " << ctx.rank() << ": the engine's cycle time " << cycle_ms
                          << " ms is outside 0..10000");
  config.cycle_time = std::chrono::microseconds(static_cast<int64_t>(cycle_ms * 1000.0));
  config.fusion_threshold_bytes = options.fusion_threshold_bytes.value_or(t.fusion_threshold_bytes);
  config.fusion_max_tensor_bytes =
      options.fusion_max_tensor_bytes.value_or(t.fusion_max_tensor_bytes);
  config.cache_capacity = options.cache_capacity.value_or(t.cache_capacity);
  RINGD_CHECK_ARG(config.cache_capacity <= (size_t{1} << 20),
                  "rank " << ctx.rank() << ": response cache capacity " << config.cache_capacity
                          << " is above 1048576");
  config.stall_warning_s = options.stall_warning_s.value_or(t.stall_warning_s);
  config.stall_shutdown_s = options.stall_shutdown_s.value_or(t.stall_shutdown_s);
  RINGD_CHECK_ARG(config.stall_warning_s >= 0 && config.stall_shutdown_s >= 0,
                  "rank " << ctx.rank() << ": stall limits must not be negative");
  config.timeline_path = timeline_for_rank(options.timeline_path.value_or(t.timeline), ctx.rank());
  config.compression = options.compression.value_or(parse_compression(t.compression));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  config.copy_threads = options.copy_threads.value_or(t.fusion_threads);
  if (config.copy_threads <= 0) config.copy_threads = std::min(4, cores);
  compression::check_dgc_options(options.dgc);
  config.dgc = options.dgc;
  config.collective = options.collective;
  config.on_stall = options.on_stall;
  config.record_cycles = options.record_cycles;
  config.local_group = options.local_group;
  config.hierarchy = options.hierarchy;
  config.hierarchy.inter_node = options.collective;
  config.hierarchy.check_agreement = false;
  RINGD_CHECK_ARG(!config.local_group || config.compression != Compression::kDgc,
                  "rank " << ctx.rank() << ": dgc compression does not run over local devices yet "
                          << "(" << config.local_group->size() << " " << config.local_group->kind()
                          << " devices); use --local-devices 1 with dgc");

  // The heartbeat: a quarter of the tightest limit a waiting rank is held to, at most 1 s.
  const std::chrono::milliseconds timeout =
      options.collective.timeout.count() > 0 ? options.collective.timeout : ctx.timeout();
  std::chrono::milliseconds heartbeat =
      std::min<std::chrono::milliseconds>(std::chrono::milliseconds(1000), timeout / 4);
  for (double limit_s : {config.stall_warning_s, config.stall_shutdown_s}) {
    if (limit_s > 0) {
      heartbeat = std::min(heartbeat,
                           std::chrono::milliseconds(static_cast<int64_t>(limit_s * 1000.0 / 4)));
    }
  }
  config.heartbeat = std::max(heartbeat, std::chrono::milliseconds(1));
  return config;
}

}  // namespace ringd::fusion
