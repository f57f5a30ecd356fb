// The one place that reads RINGD_* environment variables. Each is read once, on first use of
// tunables(); command-line flags override the returned values where the CLI offers them. The table
// returned by tunable_table() is what `ringd --help-env` and docs/tunables.md show.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace ringd {

struct Tunables {
  std::chrono::milliseconds timeout{30000};  // RINGD_TIMEOUT (seconds)
  size_t segment_bytes = 1 << 20;            // RINGD_SEGMENT_BYTES
  size_t segments_in_flight = 4;             // RINGD_SEGMENTS_IN_FLIGHT
  size_t small_allreduce_bytes = 32 << 10;   // RINGD_SMALL_ALLREDUCE_BYTES
  size_t ring_allreduce_bytes = 2 << 20;     // RINGD_RING_ALLREDUCE_BYTES
  // RINGD_TUNE_ALLREDUCE: measure rd against hd per size class (off when
  // RINGD_SMALL_ALLREDUCE_BYTES fixes the threshold and this is unset)
  bool tune_allreduce = true;
  size_t hierarchy_chunk_bytes = 4 << 20;  // RINGD_HIERARCHY_CHUNK_BYTES (0 = no pipeline)
  size_t socket_buffer_bytes = 0;          // RINGD_SOCKET_BUFFER_BYTES (0 = kernel autotuning)
  std::string tcp_congestion = "reno";     // RINGD_TCP_CONGESTION ("system" = the kernel's)
  bool tcp_congestion_chosen = false;      // RINGD_TCP_CONGESTION is set: a refusal is an error
  // RINGD_SPIN_US: tcp small receives and CUDA event waits poll (yielding) this long before
  // sleeping
  int spin_us = 200;
  std::string interface;   // RINGD_IFACE: network interface for tcp (e.g. eth0)
  std::string job_secret;  // RINGD_JOB_SECRET or contents of RINGD_JOB_SECRET_FILE
  int log_level = 1;       // RINGD_LOG_LEVEL: error=0 warn=1 info=2 debug=3
  bool log_json = false;   // RINGD_LOG_FORMAT=json: one JSON object per log line
  std::string ib_device;   // RINGD_IB_DEVICE: RDMA device for ibverbs (empty = first active)
  int ib_port = 1;         // RINGD_IB_PORT
  int ib_gid_index = -1;   // RINGD_IB_GID_INDEX (-1 = auto)
  // The fusion engine (include/ringd/engine.h); EngineOptions override these.
  double cycle_time_ms = 1.0;                // RINGD_CYCLE_TIME_MS
  size_t fusion_threshold_bytes = 64 << 20;  // RINGD_FUSION_THRESHOLD_BYTES (0 = no fusion)
  size_t fusion_max_tensor_bytes = 1 << 20;  // RINGD_FUSION_MAX_TENSOR_BYTES (0 = any size)
  size_t cache_capacity = 1024;              // RINGD_CACHE_CAPACITY (0 = no response cache)
  double stall_warning_s = 60;               // RINGD_STALL_WARNING_S (0 = no inspector)
  double stall_shutdown_s = 1800;            // RINGD_STALL_SHUTDOWN_S (0 = never)
  double elastic_settle_s = 0.5;             // RINGD_ELASTIC_SETTLE_S: ringd train --elastic
  std::string timeline;                      // RINGD_TIMELINE: Chrome-trace JSON file
  std::string compression = "none";          // RINGD_COMPRESSION: none, fp16 or bf16
  int fusion_threads = 0;                    // RINGD_FUSION_THREADS (0 = min(4, cores))
  // The launcher (docs/launcher.md). RINGD_REPLICAS, RINGD_SERVICE, RINGD_CLUSTER_DOMAIN,
  // RINGD_TRANSPORT and RINGD_RENDEZVOUS_PORT are read with the process's other identity inputs
  // by src/job/topology.cc's environment lookup
  // (so identity is unit-tested from a fake environment); they are listed in tunable_table().
  int agent_port = 29400;    // RINGD_AGENT_PORT: the agent's exec service
  int http_port = 29401;     // RINGD_HTTP_PORT: the agent's /healthz /readyz /metrics
  std::string metrics_file;  // RINGD_METRICS_FILE: rank 0's Prometheus text for the agent
};

struct TunableInfo {
  const char* name;
  const char* default_value;
  const char* description;
};

// Parsed on first call; throws ringd::Error(kInvalidArgument) naming the variable when a value is
// malformed. The first call also warns once about each unknown RINGD_* variable in the environment
// (unknown_variable_warnings).
const Tunables& tunables();
// The environment parsed now, every call (tunables() keeps its first result); for tests.
Tunables load_tunables();
const std::vector<TunableInfo>& tunable_table();

// RINGD_* variables read by ringd's scripts (scripts/, bench/), not by the binary: never warned
// about.
const std::vector<std::string>& script_variables();

// One warning per "NAME=VALUE" entry of `environment` whose NAME starts with RINGD_ but is neither
// in tunable_table() nor in script_variables(), naming the closest known variable when one is
// close ("RINGD_TIMOUT is not a ringd variable and is ignored; did you mean RINGD_TIMEOUT? ...").
std::vector<std::string> unknown_variable_warnings(const std::vector<std::string>& environment);

// RINGD_LOG_LEVEL's value -> 0 (error) .. 3 (debug): error/err, warn/warning, info, debug in any
// case, or the digit. Throws kInvalidArgument naming the variable and the accepted words.
int parse_log_level(const std::string& text);

// The longest duration any flag or variable may give, in seconds: 1e6 s (11.6 days). Waits end at
// a deadline of now + the duration on a 64-bit nanosecond clock, which a timeout of 1e10 s (317
// years) overflowed into the past: the first wait timed out at once.
constexpr double kMaxSeconds = 1e6;

// Helpers shared with the CLI: "30", "1.5" seconds (at most kMaxSeconds); byte sizes "4096",
// "64K", "1M", "2G".
std::chrono::milliseconds parse_seconds(const std::string& name, const std::string& text);
size_t parse_bytes(const std::string& name, const std::string& text);

}  // namespace ringd
