// The ibverbs transport (rdma-core): one reliable-connected (RC) queue pair per pair of ranks, set
// up through the rendezvous Store. Messages travel as RDMA WRITE WITH IMMEDIATE into a ring of
// fixed-size receive slots on the peer, registered once per pair; the receiver returns free slots
// to the sender as credits, so a sender never overruns it. Completions are waited for on a
// completion channel (poll(2) on its file descriptor), never by spinning.
//
// Built only when rdma-core was found (RINGD_HAVE_IBVERBS in ringd/config.h); in other builds
// ibverbs_connect() throws kUnavailable. See docs/architecture.md for what has (not) run on RDMA
// hardware.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ringd/store.h"
#include "ringd/transport.h"

namespace ringd {

struct IbverbsOptions {
  std::string device;     // e.g. "mlx5_0"; empty = RINGD_IB_DEVICE, else the first device whose
                          // port is ACTIVE
  int port = 0;           // HCA port (1-based); 0 = RINGD_IB_PORT (default 1)
  int gid_index = -2;     // -2 = RINGD_IB_GID_INDEX; -1 = auto (RoCE: first RoCE v2 IPv4 GID)
  size_t slots = 0;       // receive slots per pair and direction (the credit window); 0 = 16
  size_t slot_bytes = 0;  // bytes per slot, header included; 0 = 64 KiB
  std::chrono::milliseconds timeout{0};  // 0 = tunables().timeout
};

// Opens the RDMA device, creates one RC queue pair per peer, publishes this rank's connection
// details in `store` ("ibverbs/<rank>/<peer>"), connects to every peer and returns the context.
// Throws kUnavailable when there is no RDMA device (or none by the requested name), kTimeout when
// a peer never published its details, kMismatch when ranks were configured differently.
std::unique_ptr<Context> ibverbs_connect(Store& store, int rank, int size,
                                         const IbverbsOptions& options = {});

// Names of the RDMA devices rdma-core sees on this host (empty when none, or not built).
std::vector<std::string> ibverbs_device_names();

}  // namespace ringd
