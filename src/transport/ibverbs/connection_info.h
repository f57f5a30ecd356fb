// What one rank publishes in the rendezvous store for one peer ("ibverbs/<rank>/<peer>"): the
// address of the queue pair it created for that peer and where the peer may write.
//
// Encoding (little-endian, fixed fields, then the two strings):
//   magic "RDIB" u32 | version u16 | link_layer u8 | mtu u8 | rank u32 | peer u32 | world u32 |
//   lid u16 | port u8 | global u8 | gid[16] | qpn u32 | psn u32 | slots u32 | slot_bytes u32 |
//   ring_address u64 | rkey u32 | host_len u16 | device_len u16 | host | device
// Pure: no verbs types, so it is unit-tested without hardware. decode() rejects truncated,
// foreign, other-version and trailing-garbage blobs with kProtocol naming the store key.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ringd::ibverbs {

constexpr uint32_t kInfoMagic = 0x42494452u;  // "RDIB" read as little-endian bytes
constexpr uint16_t kInfoVersion = 1;
constexpr size_t kMaxInfoNameBytes = 255;

// Values of ibv_port_attr::link_layer that matter here (mirrored so this stays verbs-free).
enum class LinkLayer : uint8_t { kUnspecified = 0, kInfiniBand = 1, kEthernet = 2 };

struct ConnectionInfo {
  int rank = 0;        // who wrote it
  int peer = 0;        // for whom
  int world_size = 0;  // as the writer sees it
  LinkLayer link_layer = LinkLayer::kInfiniBand;
  uint8_t mtu = 0;      // enum ibv_mtu (1 = 256 .. 5 = 4096)
  uint8_t port = 0;     // HCA port number
  bool global = false;  // address with the GID (GRH): always on RoCE, across subnets on IB
  uint16_t lid = 0;
  std::array<uint8_t, 16> gid{};
  uint32_t qpn = 0;
  uint32_t psn = 0;  // 24 bits
  uint32_t slots = 0;
  uint32_t slot_bytes = 0;
  uint64_t ring_address = 0;  // the writer's receive ring for this peer
  uint32_t rkey = 0;
  std::string host;    // hostname, for error messages
  std::string device;  // e.g. "mlx5_0"

  bool operator==(const ConnectionInfo&) const = default;
};

std::vector<uint8_t> encode(const ConnectionInfo& info);
// `what` names the blob in errors, e.g. "store key ibverbs/3/0".
ConnectionInfo decode(const std::vector<uint8_t>& blob, const std::string& what);

// `remote` was published by remote.rank for `local.rank`. Throws kProtocol when it was meant for
// someone else, kMismatch when the two ranks disagree on the world size, link layer or slot
// geometry (RINGD_IB_* or IbverbsOptions differ between ranks).
void check_compatible(const ConnectionInfo& local, const ConnectionInfo& remote,
                      const std::string& what);

// "rank 3 (node-b mlx5_0:1)".
std::string describe_peer(const ConnectionInfo& remote);

}  // namespace ringd::ibverbs
