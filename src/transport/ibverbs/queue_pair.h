// One reliable-connected queue pair to one peer, the memory registrations of that pair, and the
// Link (link.h) that posts a Channel's writes and receives on it.
//
// Connection: RESET -> INIT (port, remote-write access) -> RTR (the peer's QPN, PSN, LID/GID and
// the smaller of both MTUs) -> RTS (our PSN, retry counts). Every send work request is signalled
// (the channel counts completions); receive work requests carry no buffer (immediates only).
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/ibverbs/connection_info.h"
#include "transport/ibverbs/link.h"
#include "transport/ibverbs/verbs_device.h"

namespace ringd::ibverbs {

// wr_id = peer << 32 | cookie; receives use kReceiveCookie.
constexpr uint32_t kReceiveCookie = 0xFFFFFFFFu;
inline uint64_t make_wr_id(int peer, uint32_t cookie) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(peer)) << 32) | cookie;
}

class MemoryRegion {
 public:
  // Throws kIo naming `what` (e.g. "the receive ring for peer rank 3") when registration fails.
  MemoryRegion(ibv_pd* pd, void* address, size_t bytes, int access, int rank,
               const std::string& what);
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }

 private:
  ibv_mr* mr_ = nullptr;
};

class QueuePair {
 public:
  QueuePair(VerbsDevice& device, uint32_t depth, int peer);
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  ibv_qp* get() const { return qp_; }
  uint32_t qpn() const { return qp_->qp_num; }
  void to_init();
  void to_rtr(const ConnectionInfo& remote, uint8_t local_mtu);
  void to_rts(uint32_t psn);

 private:
  [[noreturn]] void fail(const char* step, int error) const;

  VerbsDevice& device_;
  const int peer_;
  ibv_qp* qp_ = nullptr;
};

class VerbsLink : public Link {
 public:
  // `stage_base` is the start of this side's pair memory (stage offsets are relative to it) and
  // `stage_lkey` the staging ring's registration; the peer's receive ring is at
  // `remote.ring_address` with `remote.rkey`.
  VerbsLink(ibv_qp* qp, int rank, const ConnectionInfo& remote, uint8_t* pair_memory,
            uint32_t stage_lkey);
  void post_write(uint32_t cookie, size_t local_offset, size_t remote_offset, uint32_t bytes,
                  uint32_t imm) override;
  void post_receive() override;

 private:
  ibv_qp* qp_;
  const int rank_;
  const int peer_;
  const std::string peer_name_;
  uint8_t* pair_memory_;
  const uint32_t stage_lkey_;
  const uint64_t remote_ring_;
  const uint32_t remote_rkey_;
};

}  // namespace ringd::ibverbs
