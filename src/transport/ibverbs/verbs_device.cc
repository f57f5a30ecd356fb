#include "transport/ibverbs/verbs_device.h"

#include <fcntl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "common/logging.h"
#include "ringd/error.h"
#include "ringd/ibverbs.h"
#include "transport/ibverbs/device_select.h"

namespace ringd::ibverbs {
namespace {

using DeviceList = std::unique_ptr<ibv_device*, void (*)(ibv_device**)>;

// ibv_get_device_list(); an empty list (not an error) when rdma-core finds no device or the
// kernel has no RDMA support at all.
DeviceList device_list(int* count) {
  *count = 0;
  ibv_device** devices = ibv_get_device_list(count);
  if (!devices) *count = 0;
  return DeviceList(devices, [](ibv_device** list) {
    if (list) ibv_free_device_list(list);
  });
}

std::string errno_text(int error) { return std::strerror(error); }

void set_nonblocking(int fd, int rank, const char* what) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    RINGD_THROW(kIo, "rank " << rank << ": cannot make the " << what
                             << " non-blocking: " << errno_text(errno));
  }
}

bool ipv4_mapped(const uint8_t* gid) {
  for (int i = 0; i < 10; ++i) {
    if (gid[i] != 0) return false;
  }
  return gid[10] == 0xFF && gid[11] == 0xFF;
}

// The first RoCE v2 GID holding an IPv4 address, else the first RoCE v2 GID, else 0.
int auto_gid_index(ibv_context* context, int port) {
  ibv_port_attr attr{};
  if (ibv_query_port(context, static_cast<uint8_t>(port), &attr) != 0) return 0;
  int first_v2 = -1;
  for (int i = 0; i < attr.gid_tbl_len; ++i) {
    ibv_gid_entry entry{};
    if (ibv_query_gid_ex(context, static_cast<uint32_t>(port), static_cast<uint32_t>(i), &entry,
                         0) != 0) {
      continue;  // an empty table slot
    }
    if (entry.gid_type != IBV_GID_TYPE_ROCE_V2) continue;
    if (ipv4_mapped(entry.gid.raw)) return i;
    if (first_v2 < 0) first_v2 = i;
  }
  return first_v2 >= 0 ? first_v2 : 0;
}

}  // namespace

std::string describe_wc_status(ibv_wc_status status, uint32_t vendor_error) {
  char text[192];
  std::snprintf(text, sizeof(text), "%s (status %d, vendor error 0x%x)", ibv_wc_status_str(status),
                static_cast<int>(status), vendor_error);
  return text;
}

VerbsDevice::VerbsDevice(int rank, const ResolvedIbOptions& options, uint32_t cq_entries)
    : rank_(rank), port_(options.port) {
  try {
    open(options);
    resolve_gid(options.gid_index);
    create_queues(cq_entries);
  } catch (...) {
    release();
    throw;
  }
  RINGD_LOG(kInfo) << "rank " << rank << ": ibverbs on " << name_ << " port " << port_ << " ("
                   << (link_layer_ == LinkLayer::kEthernet ? "RoCE" : "InfiniBand") << ", lid "
                   << lid_ << (global_ ? ", GID index " + std::to_string(gid_index_) : "") << ")";
}

VerbsDevice::~VerbsDevice() { release(); }

void VerbsDevice::release() {
  if (cq_) ibv_destroy_cq(cq_);
  if (channel_) ibv_destroy_comp_channel(channel_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (context_) ibv_close_device(context_);
  cq_ = nullptr;
  channel_ = nullptr;
  pd_ = nullptr;
  context_ = nullptr;
}

void VerbsDevice::open(const ResolvedIbOptions& options) {
  int count = 0;
  DeviceList devices = device_list(&count);
  std::vector<DeviceCandidate> candidates;
  std::vector<ibv_context*> contexts;
  for (int i = 0; i < count; ++i) {
    DeviceCandidate candidate;
    candidate.name = ibv_get_device_name(devices.get()[i]);
    ibv_context* context = ibv_open_device(devices.get()[i]);
    ibv_port_attr attr{};
    if (!context) {
      candidate.port_state = "cannot open: " + errno_text(errno);
    } else if (ibv_query_port(context, static_cast<uint8_t>(options.port), &attr) != 0) {
      candidate.port_state = "no port " + std::to_string(options.port);
    } else {
      candidate.port_state = ibv_port_state_str(attr.state);
      candidate.port_active = attr.state == IBV_PORT_ACTIVE;
    }
    candidates.push_back(candidate);
    contexts.push_back(context);
  }
  size_t chosen = 0;
  try {
    chosen = choose_device(candidates, options.device, options.port, rank_, options.device_source);
  } catch (...) {
    for (ibv_context* context : contexts) {
      if (context) ibv_close_device(context);
    }
    throw;
  }
  for (size_t i = 0; i < contexts.size(); ++i) {
    if (i != chosen && contexts[i]) ibv_close_device(contexts[i]);
  }
  context_ = contexts[chosen];
  name_ = candidates[chosen].name;

  ibv_port_attr attr{};
  if (ibv_query_port(context_, static_cast<uint8_t>(port_), &attr) != 0) {
    RINGD_THROW(kIo, "rank " << rank_ << ": ibv_query_port(" << name_ << ", " << port_
                             << ") failed: " << errno_text(errno));
  }
  link_layer_ =
      attr.link_layer == IBV_LINK_LAYER_ETHERNET ? LinkLayer::kEthernet : LinkLayer::kInfiniBand;
  lid_ = attr.lid;
  active_mtu_ = static_cast<uint8_t>(attr.active_mtu);
}

void VerbsDevice::resolve_gid(int requested_index) {
  // InfiniBand inside one subnet routes by LID; a GID (GRH) only when asked for. RoCE always
  // needs one: by default the first RoCE v2 entry holding an IPv4 address (routable over IP).
  // The GID is published either way, so a peer that does use a GRH can reach this rank.
  global_ = link_layer_ == LinkLayer::kEthernet || requested_index >= 0;
  if (requested_index >= 0) {
    gid_index_ = requested_index;
  } else {
    gid_index_ = link_layer_ == LinkLayer::kEthernet ? auto_gid_index(context_, port_) : 0;
  }
  ibv_gid gid{};
  if (ibv_query_gid(context_, static_cast<uint8_t>(port_), gid_index_, &gid) != 0) {
    if (!global_) return;  // LID routing needs no GID
    RINGD_THROW(kUnavailable, "rank " << rank_ << ": " << name_ << " port " << port_
                                      << " has no GID at index " << gid_index_
                                      << "; list them with `show_gids` or `ibv_devinfo -v` and "
                                         "set RINGD_IB_GID_INDEX");
  }
  std::memcpy(gid_.data(), gid.raw, gid_.size());
}

void VerbsDevice::create_queues(uint32_t cq_entries) {
  ibv_device_attr attr{};
  if (ibv_query_device(context_, &attr) != 0) {
    RINGD_THROW(kIo, "rank " << rank_ << ": ibv_query_device(" << name_
                             << ") failed: " << errno_text(errno));
  }
  if (cq_entries > static_cast<uint32_t>(attr.max_cqe)) {
    RINGD_THROW(kUnavailable, "rank " << rank_ << ": " << name_ << " supports completion queues of "
                                      << attr.max_cqe << " entries, this job needs " << cq_entries
                                      << "; use fewer ibverbs slots (IbverbsOptions::slots) or "
                                         "fewer ranks per context");
  }
  pd_ = ibv_alloc_pd(context_);
  if (!pd_) RINGD_THROW(kIo, "rank " << rank_ << ": ibv_alloc_pd(" << name_ << ") failed");
  channel_ = ibv_create_comp_channel(context_);
  if (!channel_) {
    RINGD_THROW(kIo, "rank " << rank_ << ": ibv_create_comp_channel(" << name_
                             << ") failed: " << errno_text(errno));
  }
  set_nonblocking(channel_->fd, rank_, "completion channel");
  set_nonblocking(context_->async_fd, rank_, "asynchronous event channel");
  cq_ = ibv_create_cq(context_, static_cast<int>(cq_entries), nullptr, channel_, 0);
  if (!cq_) {
    RINGD_THROW(kIo, "rank " << rank_ << ": ibv_create_cq(" << name_ << ", " << cq_entries
                             << " entries) failed: " << errno_text(errno));
  }
}

std::vector<std::string> list_device_names() {
  int count = 0;
  DeviceList devices = device_list(&count);
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.emplace_back(ibv_get_device_name(devices.get()[i]));
  return names;
}

}  // namespace ringd::ibverbs

namespace ringd {

std::vector<std::string> ibverbs_device_names() { return ibverbs::list_device_names(); }

}  // namespace ringd
