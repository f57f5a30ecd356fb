#include "transport/ibverbs/connection_info.h"

#include <algorithm>

#include "ringd/error.h"

namespace ringd::ibverbs {
namespace {

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void bytes(const uint8_t* data, size_t n) { out_.insert(out_.end(), data, data + n); }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  Reader(const std::vector<uint8_t>& in, const std::string& what) : in_(in), what_(what) {}
  uint8_t u8() { return static_cast<uint8_t>(get(1)); }
  uint16_t u16() { return static_cast<uint16_t>(get(2)); }
  uint32_t u32() { return static_cast<uint32_t>(get(4)); }
  uint64_t u64() { return get(8); }
  void bytes(uint8_t* out, size_t n) {
    need(n);
    for (size_t i = 0; i < n; ++i) out[i] = in_[pos_ + i];
    pos_ += n;
  }
  std::string text(size_t n) {
    need(n);
    std::string s(in_.begin() + static_cast<std::ptrdiff_t>(pos_),
                  in_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
    pos_ += n;
    return s;
  }
  void finish() const {
    if (pos_ != in_.size()) {
      RINGD_THROW(kProtocol, what_ << ": " << in_.size() - pos_
                                   << " unexpected trailing bytes after the ibverbs connection "
                                      "details; is every rank running the same ringd version?");
    }
  }

 private:
  void need(size_t n) const {
    if (in_.size() - pos_ < n) {
      RINGD_THROW(kProtocol, what_ << ": ibverbs connection details truncated (" << in_.size()
                                   << " bytes); is every rank running the same ringd version?");
    }
  }
  uint64_t get(int n) {
    need(static_cast<size_t>(n));
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{in_[pos_ + static_cast<size_t>(i)]} << (8 * i);
    pos_ += static_cast<size_t>(n);
    return v;
  }
  const std::vector<uint8_t>& in_;
  const std::string& what_;
  size_t pos_ = 0;
};

uint16_t clipped_length(const std::string& s) {
  return static_cast<uint16_t>(std::min(s.size(), kMaxInfoNameBytes));
}

}  // namespace

std::vector<uint8_t> encode(const ConnectionInfo& info) {
  Writer w;
  w.u32(kInfoMagic);
  w.u16(kInfoVersion);
  w.u8(static_cast<uint8_t>(info.link_layer));
  w.u8(info.mtu);
  w.u32(static_cast<uint32_t>(info.rank));
  w.u32(static_cast<uint32_t>(info.peer));
  w.u32(static_cast<uint32_t>(info.world_size));
  w.u16(info.lid);
  w.u8(info.port);
  w.u8(info.global ? 1 : 0);
  w.bytes(info.gid.data(), info.gid.size());
  w.u32(info.qpn);
  w.u32(info.psn);
  w.u32(info.slots);
  w.u32(info.slot_bytes);
  w.u64(info.ring_address);
  w.u32(info.rkey);
  const uint16_t host_len = clipped_length(info.host);
  const uint16_t device_len = clipped_length(info.device);
  w.u16(host_len);
  w.u16(device_len);
  w.bytes(reinterpret_cast<const uint8_t*>(info.host.data()), host_len);
  w.bytes(reinterpret_cast<const uint8_t*>(info.device.data()), device_len);
  return w.take();
}

ConnectionInfo decode(const std::vector<uint8_t>& blob, const std::string& what) {
  Reader r(blob, what);
  const uint32_t magic = r.u32();
  if (magic != kInfoMagic) {
    RINGD_THROW(kProtocol, what << ": not ibverbs connection details (starts with 0x" << std::hex
                                << magic << ", expected 0x" << kInfoMagic << std::dec
                                << "); did another transport or job write this key?");
  }
  const uint16_t version = r.u16();
  if (version != kInfoVersion) {
    RINGD_THROW(kProtocol, what << ": ibverbs connection details of version " << version
                                << ", this ringd speaks " << kInfoVersion
                                << "; run the same ringd version on every rank");
  }
  ConnectionInfo info;
  const uint8_t link_layer = r.u8();
  if (link_layer > static_cast<uint8_t>(LinkLayer::kEthernet)) {
    RINGD_THROW(kProtocol, what << ": unknown link layer " << int{link_layer});
  }
  info.link_layer = static_cast<LinkLayer>(link_layer);
  info.mtu = r.u8();
  info.rank = static_cast<int>(r.u32());
  info.peer = static_cast<int>(r.u32());
  info.world_size = static_cast<int>(r.u32());
  info.lid = r.u16();
  info.port = r.u8();
  const uint8_t global = r.u8();
  if (global > 1) RINGD_THROW(kProtocol, what << ": corrupt GRH flag " << int{global});
  info.global = global == 1;
  r.bytes(info.gid.data(), info.gid.size());
  info.qpn = r.u32();
  info.psn = r.u32();
  info.slots = r.u32();
  info.slot_bytes = r.u32();
  info.ring_address = r.u64();
  info.rkey = r.u32();
  const uint16_t host_len = r.u16();
  const uint16_t device_len = r.u16();
  info.host = r.text(host_len);
  info.device = r.text(device_len);
  r.finish();
  return info;
}

void check_compatible(const ConnectionInfo& local, const ConnectionInfo& remote,
                      const std::string& what) {
  if (remote.peer != local.rank || remote.rank != local.peer) {
    RINGD_THROW(kProtocol, "rank " << local.rank << ": " << what << " holds details from rank "
                                   << remote.rank << " for rank " << remote.peer
                                   << ", expected from rank " << local.peer << " for rank "
                                   << local.rank << "; is another job using the same store?");
  }
  const std::string peer = describe_peer(remote);
  if (remote.world_size != local.world_size) {
    RINGD_THROW(kMismatch, "rank " << local.rank << ": peer " << peer << " has world size "
                                   << remote.world_size << ", this rank " << local.world_size
                                   << "; start every rank with the same size");
  }
  if (remote.link_layer != local.link_layer) {
    RINGD_THROW(kMismatch, "rank " << local.rank << ": peer " << peer
                                   << " is on another link layer (InfiniBand vs Ethernet/RoCE); "
                                      "choose devices on the same fabric with RINGD_IB_DEVICE");
  }
  if (remote.slots != local.slots || remote.slot_bytes != local.slot_bytes) {
    RINGD_THROW(kMismatch, "rank " << local.rank << ": peer " << peer << " uses " << remote.slots
                                   << " slots of " << remote.slot_bytes << " bytes, this rank "
                                   << local.slots << " of " << local.slot_bytes
                                   << "; give every rank the same ibverbs options");
  }
  if (remote.mtu < 1 || remote.mtu > 5 || remote.qpn == 0 || remote.qpn > 0xFFFFFF) {
    RINGD_THROW(kProtocol, "rank " << local.rank << ": peer " << peer
                                   << " published an invalid queue pair address (mtu "
                                   << int{remote.mtu} << ", qpn " << remote.qpn << ")");
  }
}

std::string describe_peer(const ConnectionInfo& remote) {
  return "rank " + std::to_string(remote.rank) + " (" + remote.host + " " + remote.device + ":" +
         std::to_string(remote.port) + ")";
}

}  // namespace ringd::ibverbs
