// The RDMA device one ibverbs context uses: the opened HCA, its protection domain, and the one
// completion queue (with its completion channel) that every queue pair of the context shares.
// Also resolves which port and GID this rank is reachable at.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/ibverbs/connection_info.h"
#include "transport/ibverbs/slot_format.h"

namespace ringd::ibverbs {

struct ResolvedIbOptions {
  std::string device;         // empty = first with an active port
  std::string device_source;  // where `device` came from, for messages
  int port = 1;
  int gid_index = -1;  // -1 = auto
  SlotGeometry geometry;
  std::chrono::milliseconds timeout{0};
};

class VerbsDevice {
 public:
  // Throws kUnavailable when no (or no such) device is usable, kIo when a verbs call fails.
  // `cq_entries` sizes the shared completion queue.
  VerbsDevice(int rank, const ResolvedIbOptions& options, uint32_t cq_entries);
  ~VerbsDevice();
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  ibv_cq* cq() const { return cq_; }
  ibv_comp_channel* completion_channel() const { return channel_; }
  const std::string& name() const { return name_; }
  int rank() const { return rank_; }

  int port() const { return port_; }
  LinkLayer link_layer() const { return link_layer_; }
  uint16_t lid() const { return lid_; }
  bool global() const { return global_; }  // address with the GID (GRH)
  int gid_index() const { return gid_index_; }
  const std::array<uint8_t, 16>& gid() const { return gid_; }
  uint8_t active_mtu() const { return active_mtu_; }  // enum ibv_mtu

 private:
  void open(const ResolvedIbOptions& options);
  void release();
  void resolve_gid(int requested_index);
  void create_queues(uint32_t cq_entries);

  const int rank_;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::string name_;
  int port_ = 1;
  LinkLayer link_layer_ = LinkLayer::kInfiniBand;
  uint16_t lid_ = 0;
  bool global_ = false;
  int gid_index_ = 0;
  std::array<uint8_t, 16> gid_{};
  uint8_t active_mtu_ = IBV_MTU_1024;
};

// Names of the devices rdma-core lists (ibverbs_device_names()).
std::vector<std::string> list_device_names();

// "transport retry counter exceeded (status 12, vendor error 0x81)".
std::string describe_wc_status(ibv_wc_status status, uint32_t vendor_error);

}  // namespace ringd::ibverbs
