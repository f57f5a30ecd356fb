// ibverbs_connect(): open the device, create one RC queue pair and one pair memory per peer,
// publish "ibverbs/<rank>/<peer>" (connection_info.h), read every peer's entry for this rank,
// bring each queue pair to RTS, start the completion thread, then meet every peer at
// "ibverbs/<rank>/ready" so nobody writes to a queue pair that is not ready to receive.
#include <algorithm>
#include <random>
#include <unordered_map>

#include "common/host_name.h"
#include "common/logging.h"
#include "common/tunables.h"
#include "ringd/error.h"
#include "ringd/ibverbs.h"
#include "transport/ibverbs/completion_loop.h"
#include "transport/ibverbs/pair.h"
#include "transport/ibverbs/queue_pair.h"
#include "transport/ibverbs/verbs_device.h"

namespace ringd {
namespace {

using Clock = std::chrono::steady_clock;

ibverbs::ResolvedIbOptions resolve(const IbverbsOptions& options) {
  ibverbs::ResolvedIbOptions resolved;
  resolved.device = options.device.empty() ? tunables().ib_device : options.device;
  resolved.device_source = options.device.empty() ? "RINGD_IB_DEVICE" : "IbverbsOptions::device";
  resolved.port = options.port > 0 ? options.port : tunables().ib_port;
  resolved.gid_index = options.gid_index == -2 ? tunables().ib_gid_index : options.gid_index;
  const size_t slots = options.slots > 0 ? options.slots : 16;
  const size_t slot_bytes = options.slot_bytes > 0 ? options.slot_bytes : size_t{64} << 10;
  RINGD_CHECK_ARG(slots <= ibverbs::kMaxSlots,
                  "ibverbs: " << slots << " slots per pair; at most " << ibverbs::kMaxSlots);
  RINGD_CHECK_ARG(slot_bytes >= ibverbs::kMinSlotBytes && slot_bytes <= (size_t{1} << 30) &&
                      slot_bytes % 64 == 0,
                  "ibverbs: slot size " << slot_bytes << " must be a multiple of 64 in "
                                        << ibverbs::kMinSlotBytes << "..1G");
  resolved.geometry.slots = static_cast<uint32_t>(slots);
  resolved.geometry.slot_bytes = static_cast<uint32_t>(slot_bytes);
  resolved.timeout = options.timeout.count() > 0 ? options.timeout : tunables().timeout;
  return resolved;
}

std::string info_key(int from, int to) {
  return "ibverbs/" + std::to_string(from) + "/" + std::to_string(to);
}
std::string ready_key(int rank) { return "ibverbs/" + std::to_string(rank) + "/ready"; }

std::vector<uint8_t> get_before(Store& store, const std::string& key, Clock::time_point deadline,
                                int rank, int peer, const char* what) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  try {
    return store.get(key, std::max(left, std::chrono::milliseconds(1)));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTimeout) throw;
    RINGD_THROW(kTimeout, "rank " << rank << ": waiting for " << what << " of peer rank " << peer
                                  << " in the rendezvous store: " << e.what()
                                  << " — did that rank start, with --transport ibverbs?");
  }
}

// Everything one ibverbs context owns, torn down in a safe order: channels closed (no more
// posts), completion thread stopped, queue pairs destroyed (nothing more lands in memory), memory
// deregistered, device closed. Channels outlive this when a Request still holds one.
struct IbMesh {
  std::unique_ptr<ibverbs::VerbsDevice> device;
  std::vector<std::shared_ptr<ibverbs::Channel>> channels;  // by peer
  std::vector<std::unique_ptr<ibverbs::MemoryRegion>> regions;
  std::vector<std::unique_ptr<ibverbs::QueuePair>> queue_pairs;  // by peer
  std::unique_ptr<ibverbs::CompletionLoop> loop;

  ~IbMesh() {
    for (auto& channel : channels) {
      if (!channel) continue;
      channel->close(RINGD_MAKE_ERROR(kInvalidArgument, "the ibverbs pair to peer "
                                                            << channel->description()
                                                            << " was closed (its context was "
                                                               "destroyed)"));
    }
    loop.reset();
    queue_pairs.clear();
    regions.clear();
    device.reset();
  }
};

}  // namespace

std::unique_ptr<Context> ibverbs_connect(Store& store, int rank, int size,
                                         const IbverbsOptions& options) {
  RINGD_CHECK_ARG(size >= 1 && rank >= 0 && rank < size,
                  "ibverbs_connect: invalid rank " << rank << " for world size " << size);
  const ibverbs::ResolvedIbOptions resolved = resolve(options);
  const ibverbs::SlotGeometry& geometry = resolved.geometry;
  const Clock::time_point deadline = Clock::now() + resolved.timeout;
  const uint32_t depth = geometry.queue_depth();
  auto mesh = std::make_shared<IbMesh>();
  mesh->device = std::make_unique<ibverbs::VerbsDevice>(
      rank, resolved, std::max<uint32_t>(16, 2 * depth * static_cast<uint32_t>(size - 1)));
  ibverbs::VerbsDevice& device = *mesh->device;
  mesh->channels.resize(size);
  mesh->queue_pairs.resize(size);
  std::vector<ibverbs::ConnectionInfo> local(size);
  std::vector<uint32_t> stage_lkeys(size, 0);
  std::mt19937 random(std::random_device{}());
  const std::string host = host_name();

  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    auto channel = std::make_shared<ibverbs::Channel>(rank, peer, geometry);
    mesh->channels[peer] = channel;
    const std::string suffix = " for peer rank " + std::to_string(peer);
    mesh->regions.push_back(std::make_unique<ibverbs::MemoryRegion>(
        device.pd(), channel->memory(), geometry.ring_bytes(),
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, rank, "the receive ring" + suffix));
    const uint32_t rkey = mesh->regions.back()->rkey();
    mesh->regions.push_back(std::make_unique<ibverbs::MemoryRegion>(
        device.pd(), channel->memory() + geometry.ring_bytes(), geometry.ring_bytes(),
        IBV_ACCESS_LOCAL_WRITE, rank, "the staging ring" + suffix));
    stage_lkeys[peer] = mesh->regions.back()->lkey();
    auto qp = std::make_unique<ibverbs::QueuePair>(device, depth, peer);
    qp->to_init();

    ibverbs::ConnectionInfo& info = local[peer];
    info.rank = rank;
    info.peer = peer;
    info.world_size = size;
    info.link_layer = device.link_layer();
    info.mtu = device.active_mtu();
    info.port = static_cast<uint8_t>(device.port());
    info.global = device.global();
    info.lid = device.lid();
    info.gid = device.gid();
    info.qpn = qp->qpn();
    info.psn = random() & 0xFFFFFF;
    info.slots = geometry.slots;
    info.slot_bytes = geometry.slot_bytes;
    info.ring_address = reinterpret_cast<uint64_t>(channel->memory());
    info.rkey = rkey;
    info.host = host;
    info.device = device.name();
    mesh->queue_pairs[peer] = std::move(qp);
    store.set(info_key(rank, peer), ibverbs::encode(info));
  }

  std::unordered_map<uint32_t, int> peer_of_qpn;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::string key = info_key(peer, rank);
    const ibverbs::ConnectionInfo remote = ibverbs::decode(
        get_before(store, key, deadline, rank, peer, "the ibverbs connection details"),
        "rank " + std::to_string(rank) + ": store key " + key);
    ibverbs::check_compatible(local[peer], remote, "store key " + key);
    ibverbs::Channel& channel = *mesh->channels[peer];
    ibverbs::QueuePair& qp = *mesh->queue_pairs[peer];
    channel.set_description(ibverbs::describe_peer(remote));
    channel.attach(std::make_shared<ibverbs::VerbsLink>(qp.get(), rank, remote, channel.memory(),
                                                        stage_lkeys[peer]));
    qp.to_rtr(remote, device.active_mtu());
    qp.to_rts(local[peer].psn);
    peer_of_qpn[qp.qpn()] = peer;
  }

  mesh->loop =
      std::make_unique<ibverbs::CompletionLoop>(device, mesh->channels, std::move(peer_of_qpn));
  mesh->loop->start();
  store.set(ready_key(rank), to_bytes("ready"));
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank) get_before(store, ready_key(peer), deadline, rank, peer, "the ready mark");
  }

  std::vector<std::unique_ptr<Pair>> pairs(size);
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank) pairs[peer] = std::make_unique<ibverbs::IbPair>(mesh->channels[peer]);
  }
  RINGD_LOG(kInfo) << "rank " << rank << ": ibverbs mesh of " << size << " ranks connected on "
                   << device.name();
  return std::make_unique<Context>(rank, size, "ibverbs", std::move(pairs), std::move(mesh),
                                   resolved.timeout);
}

}  // namespace ringd
