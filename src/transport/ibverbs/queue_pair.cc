#include "transport/ibverbs/queue_pair.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ringd/error.h"

namespace ringd::ibverbs {
namespace {

// RC retry settings: 4.096 us * 2^14 = 67 ms per try, 7 tries before a lost peer is reported;
// receiver-not-ready retries forever (7), though the receive queue is sized never to run dry.
constexpr uint8_t kAckTimeout = 14;
constexpr uint8_t kRetryCount = 7;
constexpr uint8_t kRnrRetry = 7;
constexpr uint8_t kMinRnrTimer = 12;  // 0.64 ms
constexpr uint8_t kHopLimit = 255;

}  // namespace

MemoryRegion::MemoryRegion(ibv_pd* pd, void* address, size_t bytes, int access, int rank,
                           const std::string& what) {
  mr_ = ibv_reg_mr(pd, address, bytes, access);
  if (!mr_) {
    RINGD_THROW(kIo, "rank " << rank << ": cannot register " << bytes << " bytes of " << what
                             << " with the RDMA device: " << std::strerror(errno)
                             << (errno == ENOMEM || errno == EPERM || errno == EFAULT
                                     ? " — raise the locked-memory limit (ulimit -l unlimited; in "
                                       "Kubernetes, the container's memlock rlimit)"
                                     : ""));
  }
}

MemoryRegion::~MemoryRegion() {
  if (mr_) ibv_dereg_mr(mr_);
}

QueuePair::QueuePair(VerbsDevice& device, uint32_t depth, int peer) : device_(device), peer_(peer) {
  ibv_qp_init_attr attr{};
  attr.send_cq = device.cq();
  attr.recv_cq = device.cq();
  attr.cap.max_send_wr = depth;
  attr.cap.max_recv_wr = depth;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 1;
  qp_ = ibv_create_qp(device.pd(), &attr);
  if (!qp_) fail("ibv_create_qp", errno);
}

QueuePair::~QueuePair() {
  if (qp_) ibv_destroy_qp(qp_);
}

void QueuePair::fail(const char* step, int error) const {
  RINGD_THROW(kIo, "rank " << device_.rank() << ": " << step << " for the queue pair to peer rank "
                           << peer_ << " on " << device_.name() << " port " << device_.port()
                           << " failed: " << std::strerror(error));
}

void QueuePair::to_init() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(device_.port());
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  const int error = ibv_modify_qp(
      qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (error != 0) fail("moving to INIT", error);
}

void QueuePair::to_rtr(const ConnectionInfo& remote, uint8_t local_mtu) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(std::min(local_mtu, remote.mtu));
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = kMinRnrTimer;
  attr.ah_attr.dlid = remote.lid;
  attr.ah_attr.sl = 0;
  attr.ah_attr.src_path_bits = 0;
  attr.ah_attr.port_num = static_cast<uint8_t>(device_.port());
  if (device_.global()) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid.data(), remote.gid.size());
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(device_.gid_index());
    attr.ah_attr.grh.hop_limit = kHopLimit;
    attr.ah_attr.grh.traffic_class = 0;
  }
  const int error =
      ibv_modify_qp(qp_, &attr,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (error != 0) fail("moving to RTR (ready to receive)", error);
}

void QueuePair::to_rts(uint32_t psn) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = kAckTimeout;
  attr.retry_cnt = kRetryCount;
  attr.rnr_retry = kRnrRetry;
  attr.sq_psn = psn;
  attr.max_rd_atomic = 1;
  const int error = ibv_modify_qp(qp_, &attr,
                                  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  if (error != 0) fail("moving to RTS (ready to send)", error);
}

VerbsLink::VerbsLink(ibv_qp* qp, int rank, const ConnectionInfo& remote, uint8_t* pair_memory,
                     uint32_t stage_lkey)
    : qp_(qp),
      rank_(rank),
      peer_(remote.rank),
      peer_name_(describe_peer(remote)),
      pair_memory_(pair_memory),
      stage_lkey_(stage_lkey),
      remote_ring_(remote.ring_address),
      remote_rkey_(remote.rkey) {}

void VerbsLink::post_write(uint32_t cookie, size_t local_offset, size_t remote_offset,
                           uint32_t bytes, uint32_t imm) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uint64_t>(pair_memory_ + local_offset);
  sge.length = bytes;
  sge.lkey = stage_lkey_;
  ibv_send_wr wr{};
  wr.wr_id = make_wr_id(peer_, cookie);
  wr.sg_list = bytes > 0 ? &sge : nullptr;
  wr.num_sge = bytes > 0 ? 1 : 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = remote_ring_ + remote_offset;
  wr.wr.rdma.rkey = remote_rkey_;
  ibv_send_wr* bad = nullptr;
  const int error = ibv_post_send(qp_, &wr, &bad);
  if (error != 0) {
    RINGD_THROW(kIo, "rank " << rank_ << ": posting an RDMA write to peer " << peer_name_
                             << " failed: " << std::strerror(error)
                             << " (send queue full or queue pair in error)");
  }
}

void VerbsLink::post_receive() {
  ibv_recv_wr wr{};
  wr.wr_id = make_wr_id(peer_, kReceiveCookie);
  wr.sg_list = nullptr;
  wr.num_sge = 0;
  ibv_recv_wr* bad = nullptr;
  const int error = ibv_post_recv(qp_, &wr, &bad);
  if (error != 0) {
    RINGD_THROW(kIo, "rank " << rank_ << ": posting a receive for peer " << peer_name_
                             << " failed: " << std::strerror(error));
  }
}

}  // namespace ringd::ibverbs
