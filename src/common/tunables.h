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
  size_t socket_buffer_bytes = 0;            // RINGD_SOCKET_BUFFER_BYTES (0 = kernel autotuning)
  std::string interface;                     // RINGD_IFACE: network interface for tcp (e.g. eth0)
  std::string job_secret;  // RINGD_JOB_SECRET or contents of RINGD_JOB_SECRET_FILE
  int log_level = 1;       // RINGD_LOG_LEVEL: error=0 warn=1 info=2 debug=3
  std::string ib_device;   // RINGD_IB_DEVICE: RDMA device for ibverbs (empty = first active)
  int ib_port = 1;         // RINGD_IB_PORT
  int ib_gid_index = -1;   // RINGD_IB_GID_INDEX (-1 = auto)
};

struct TunableInfo {
  const char* name;
  const char* default_value;
  const char* description;
};

// Parsed on first call; throws ringd::Error(kInvalidArgument) naming the variable when a value is
// malformed.
const Tunables& tunables();
const std::vector<TunableInfo>& tunable_table();

// Helpers shared with the CLI: "30", "1.5" seconds; byte sizes "4096", "64K", "1M", "2G".
std::chrono::milliseconds parse_seconds(const std::string& name, const std::string& text);
size_t parse_bytes(const std::string& name, const std::string& text);

}  // namespace ringd
