#include "transport/ibverbs/completion_loop.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/logging.h"
#include "transport/ibverbs/queue_pair.h"

namespace ringd::ibverbs {
namespace {
constexpr int kPollBatch = 32;
constexpr unsigned kAckBatch = 64;
}  // namespace

CompletionLoop::CompletionLoop(VerbsDevice& device, std::vector<std::shared_ptr<Channel>> channels,
                               std::unordered_map<uint32_t, int> peer_of_qpn)
    : device_(device),
      rank_(device.rank()),
      channels_(std::move(channels)),
      peer_of_qpn_(std::move(peer_of_qpn)) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    RINGD_THROW(kIo, "rank " << rank_ << ": eventfd for the ibverbs completion thread failed: "
                             << std::strerror(errno));
  }
}

CompletionLoop::~CompletionLoop() {
  stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void CompletionLoop::start() {
  if (ibv_req_notify_cq(device_.cq(), 0) != 0) {
    RINGD_THROW(kIo, "rank " << rank_ << ": ibv_req_notify_cq on " << device_.name() << " failed");
  }
  thread_ = std::thread([this] { run(); });
}

void CompletionLoop::stop() {
  if (thread_.joinable()) {
    stopping_ = true;
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  if (unacked_events_ > 0) {
    ibv_ack_cq_events(device_.cq(), unacked_events_);  // required before the CQ is destroyed
    unacked_events_ = 0;
  }
}

void CompletionLoop::run() {
  pollfd fds[3] = {{device_.completion_channel()->fd, POLLIN, 0},
                   {device_.context()->async_fd, POLLIN, 0},
                   {wake_fd_, POLLIN, 0}};
  if (!drain()) return;  // completions that arrived before the first notification was armed
  while (!stopping_) {
    const int ready = ::poll(fds, 3, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      fail_all(RINGD_MAKE_ERROR(kIo, "rank " << rank_
                                             << ": poll() in the ibverbs completion thread "
                                             << "failed: " << std::strerror(errno)));
      return;
    }
    if (fds[2].revents != 0 && stopping_) return;
    if (fds[0].revents != 0 && !on_completion_event()) return;
    if (fds[1].revents != 0) on_async_event();
  }
}

bool CompletionLoop::on_completion_event() {
  ibv_cq* cq = nullptr;
  void* cq_context = nullptr;
  while (ibv_get_cq_event(device_.completion_channel(), &cq, &cq_context) == 0) {
    ++unacked_events_;
  }
  if (unacked_events_ >= kAckBatch) {
    ibv_ack_cq_events(device_.cq(), unacked_events_);
    unacked_events_ = 0;
  }
  // Re-arm first, then drain: a completion that lands in between raises a new event.
  if (ibv_req_notify_cq(device_.cq(), 0) != 0) {
    fail_all(RINGD_MAKE_ERROR(
        kIo, "rank " << rank_ << ": ibv_req_notify_cq on " << device_.name() << " failed"));
    return false;
  }
  return drain();
}

bool CompletionLoop::drain() {
  ibv_wc completions[kPollBatch];
  for (;;) {
    const int count = ibv_poll_cq(device_.cq(), kPollBatch, completions);
    if (count < 0) {
      fail_all(RINGD_MAKE_ERROR(kIo, "rank " << rank_ << ": ibv_poll_cq on " << device_.name()
                                             << " failed; the completion queue is unusable"));
      return false;
    }
    for (int i = 0; i < count; ++i) dispatch(completions[i]);
    if (count < kPollBatch) return true;
  }
}

Channel* CompletionLoop::channel_for(uint64_t wr_id) const {
  const auto peer = static_cast<size_t>(wr_id >> 32);
  return peer < channels_.size() ? channels_[peer].get() : nullptr;
}

void CompletionLoop::dispatch(const ibv_wc& wc) {
  Channel* channel = channel_for(wc.wr_id);
  if (!channel) {
    RINGD_LOG(kWarn) << "rank " << rank_ << ": ibverbs completion for unknown work request 0x"
                     << std::hex << wc.wr_id;
    return;
  }
  const auto cookie = static_cast<uint32_t>(wc.wr_id & 0xFFFFFFFFu);
  if (wc.status != IBV_WC_SUCCESS) {
    const bool receive = cookie == kReceiveCookie;
    channel->on_failure(RINGD_MAKE_ERROR(
        kPeerLost, "rank " << rank_ << ": RDMA " << (receive ? "receive from" : "write to")
                           << " peer " << channel->description()
                           << " failed: " << describe_wc_status(wc.status, wc.vendor_err)
                           << " — the peer process probably died, or the link went down"));
    return;
  }
  if (cookie == kReceiveCookie) {
    channel->on_receive(ntohl(wc.imm_data), wc.byte_len);
  } else {
    channel->on_send_done(cookie);
  }
}

void CompletionLoop::on_async_event() {
  ibv_async_event event{};
  while (ibv_get_async_event(device_.context(), &event) == 0) {
    const ibv_event_type type = event.event_type;
    const std::string what = ibv_event_type_str(type);
    if (type == IBV_EVENT_QP_FATAL || type == IBV_EVENT_QP_REQ_ERR ||
        type == IBV_EVENT_QP_ACCESS_ERR) {
      const auto found = peer_of_qpn_.find(event.element.qp->qp_num);
      if (found != peer_of_qpn_.end() && channels_[static_cast<size_t>(found->second)]) {
        Channel& channel = *channels_[static_cast<size_t>(found->second)];
        channel.on_failure(
            RINGD_MAKE_ERROR(kPeerLost, "rank " << rank_ << ": the queue pair to peer "
                                                << channel.description() << " failed: " << what));
      }
    } else if (type == IBV_EVENT_CQ_ERR || type == IBV_EVENT_DEVICE_FATAL ||
               type == IBV_EVENT_PORT_ERR) {
      fail_all(RINGD_MAKE_ERROR(kPeerLost, "rank " << rank_ << ": RDMA device " << device_.name()
                                                   << " port " << device_.port() << " reported "
                                                   << what << "; every pair on it failed"));
    } else {
      RINGD_LOG(kInfo) << "rank " << rank_ << ": RDMA device " << device_.name() << ": " << what;
    }
    ibv_ack_async_event(&event);
  }
}

void CompletionLoop::fail_all(const Error& error) {
  for (auto& channel : channels_) {
    if (channel) channel->on_failure(error);
  }
}

}  // namespace ringd::ibverbs
