#include "transport/ibverbs/device_select.h"

#include <sstream>

#include "ringd/error.h"

namespace ringd::ibverbs {
namespace {

std::string list_candidates(const std::vector<DeviceCandidate>& candidates, int port) {
  std::ostringstream out;
  for (size_t i = 0; i < candidates.size(); ++i) {
    out << (i > 0 ? ", " : "") << candidates[i].name << " (port " << port << ": "
        << candidates[i].port_state << ")";
  }
  return out.str();
}

}  // namespace

std::string no_device_message(int rank) {
  return "rank " + std::to_string(rank) +
         ": --transport ibverbs found no RDMA device (rdma-core's ibv_get_device_list listed "
         "none; /sys/class/infiniband is empty or missing): this host has no InfiniBand/RoCE "
         "adapter, or its kernel driver (mlx5_ib, rdma_rxe for Soft-RoCE, ...) is not loaded. "
         "Use --transport tcp, or load a driver and check with `ibv_devices`";
}

size_t choose_device(const std::vector<DeviceCandidate>& candidates, const std::string& wanted,
                     int port, int rank, const std::string& source) {
  if (candidates.empty()) RINGD_THROW(kUnavailable, no_device_message(rank));
  if (!wanted.empty()) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (candidates[i].name != wanted) continue;
      if (!candidates[i].port_active) {
        RINGD_THROW(kUnavailable, "rank " << rank << ": RDMA device " << wanted << " (" << source
                                          << ") cannot be used: port " << port << " is "
                                          << candidates[i].port_state
                                          << "; check the cable/subnet manager (`ibv_devinfo -d "
                                          << wanted
                                          << "`) or choose another port "
                                             "(RINGD_IB_PORT) or device");
      }
      return i;
    }
    RINGD_THROW(kUnavailable,
                "rank " << rank << ": RDMA device '" << wanted << "' (" << source
                        << ") not found; this host has: " << list_candidates(candidates, port)
                        << ". Set RINGD_IB_DEVICE to one of them, or leave it unset "
                           "to use the first with an active port");
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].port_active) return i;
  }
  RINGD_THROW(kUnavailable, "rank " << rank << ": no RDMA device has port " << port
                                    << " active: " << list_candidates(candidates, port)
                                    << ". Check links with `ibv_devinfo`, or choose the port with "
                                       "RINGD_IB_PORT");
}

}  // namespace ringd::ibverbs
