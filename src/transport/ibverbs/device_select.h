// Which RDMA device and port a rank uses, decided from a plain list of what rdma-core reported
// (pure, so the "no device" and "not found" errors are unit-tested without hardware).
#pragma once

#include <string>
#include <vector>

namespace ringd::ibverbs {

struct DeviceCandidate {
  std::string name;          // ibv_get_device_name(), e.g. "mlx5_0"
  bool port_active = false;  // the requested port exists and is IBV_PORT_ACTIVE
  std::string port_state;    // e.g. "PORT_ACTIVE", "PORT_DOWN", "no port 2" (for messages)
};

// Index of the device to open. `wanted` empty = the first candidate whose port is active. Throws
// kUnavailable saying what was searched and what to do: no device at all (no HCA, driver not
// loaded), `wanted` not among them (lists the names), or its/every port not active. `rank` and
// `port` only label the message; `source` says where `wanted` came from (e.g. "RINGD_IB_DEVICE").
size_t choose_device(const std::vector<DeviceCandidate>& candidates, const std::string& wanted,
                     int port, int rank, const std::string& source);

// The "no RDMA device" message, shared with ibverbs_connect's early check.
std::string no_device_message(int rank);

}  // namespace ringd::ibverbs
