// PairChannel's I/O-thread half: sendmsg() straight from queued send buffers, and reads of each
// message header followed by its payload straight into the first posted receive (see pair.h).
#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "net/handshake.h"
#include "transport/tcp/pair.h"

namespace ringd::tcp {
namespace {
constexpr int kMaxSendIovecs = 64;
constexpr size_t kHeaderBytes = sizeof(MessageHeader);
}  // namespace

void PairChannel::on_io(uint32_t /*events*/) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborting_ && socket_.valid()) {  // finishing the abort notice; nothing else
    progress_send_locked();
    if (aborting_ && sends_.empty()) {
      ::shutdown(socket_.get(), SHUT_WR);
      aborting_ = false;
      completed_.notify_all();  // flush_abort() may be waiting for this
    }
    return;
  }
  if (failed_ || !socket_.valid()) return;
  bool completed = progress_send_locked();
  // A waiter in poll() reads for itself and drains the socket when it wakes; reading here too
  // could consume the data under it and leave it asleep until its poll slice ends.
  if (!failed_ && pollers_ == 0) completed |= progress_recv_locked();
  if (completed) completed_.notify_all();
}

void PairChannel::lost_locked(int error, const char* what) {
  const std::string reason = error == 0 ? std::string("connection closed by the peer (EOF)")
                                        : what + net::errno_text(error);
  fail_locked(RINGD_MAKE_ERROR(kPeerLost, "rank " << rank_ << ": connection to peer rank " << peer_
                                                  << " (" << peer_address_ << ") lost: " << reason
                                                  << " — the peer process probably died"));
}

bool PairChannel::progress_send_locked() {
  bool completed = false;
  while (!sends_.empty()) {
    iovec pieces[kMaxSendIovecs];
    int count = 0;
    for (size_t i = 0; i < sends_.size() && count + 2 <= kMaxSendIovecs; ++i) {
      PairOp& op = *sends_[i];
      if (op.progress < kHeaderBytes) {
        pieces[count++] = {reinterpret_cast<char*>(&op.header) + op.progress,
                           kHeaderBytes - op.progress};
      }
      const size_t payload_sent = op.progress > kHeaderBytes ? op.progress - kHeaderBytes : 0;
      if (op.bytes > payload_sent) {
        pieces[count++] = {op.data + payload_sent, op.bytes - payload_sent};
      }
    }
    msghdr message{};
    message.msg_iov = pieces;
    message.msg_iovlen = static_cast<size_t>(count);
    // MSG_EOR: the pieces end where a message ends, and the kernel may send that end now. Without
    // it, TCP autocorking holds a short last segment back while earlier ones of the socket are
    // still on this host (in a qdisc; across a veth, until the peer's stack takes them), and a
    // peer waiting for that tail stalls: 256 KB halving-doubling allreduces on 4 emulated nodes
    // (1 Gbit/s tbf, 256 KB burst) took 5.6-8.0 ms with stalls of 20-150 ms, 3.3-3.9 with it.
    const ssize_t sent = ::sendmsg(socket_.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT | MSG_EOR);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;  // EPOLLOUT will call us again
      lost_locked(errno, "send failed: ");
      return true;
    }
    size_t left = static_cast<size_t>(sent);
    while (!sends_.empty()) {
      PairOp& op = *sends_.front();
      const size_t needed = kHeaderBytes + op.bytes - op.progress;
      if (left < needed) {
        op.progress += left;
        break;
      }
      left -= needed;
      op.progress = kHeaderBytes + op.bytes;
      op.done = true;
      sends_.pop_front();
      completed = true;
    }
  }
  return completed;
}

// Reads (the rest of) the next header. False when the socket has nothing more for now or failed.
bool PairChannel::read_header_locked(bool* made_progress) {
  while (incoming_header_got_ < kHeaderBytes) {
    const ssize_t got =
        ::recv(socket_.get(), reinterpret_cast<char*>(&incoming_) + incoming_header_got_,
               kHeaderBytes - incoming_header_got_, MSG_DONTWAIT);
    if (got > 0) {
      incoming_header_got_ += static_cast<size_t>(got);
      *made_progress = true;
    } else if (got == 0) {
      lost_locked(0, "");
      return false;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return false;
    } else if (errno != EINTR) {
      lost_locked(errno, "receive failed: ");
      return false;
    }
  }
  if (incoming_.magic_version != (kDataMagic | net::kProtocolVersion) ||
      (incoming_.flags & ~kFlagAbort) != 0 ||
      ((incoming_.flags & kFlagAbort) && incoming_.bytes > kMaxAbortReasonBytes)) {
    fail_locked(RINGD_MAKE_ERROR(
        kProtocol, "rank " << rank_ << ": corrupt stream from peer rank " << peer_ << " ("
                           << peer_address_ << "): message header starts with 0x" << std::hex
                           << incoming_.magic_version << " (flags 0x" << incoming_.flags
                           << "), expected 0x" << (kDataMagic | net::kProtocolVersion)));
    return false;
  }
  have_header_ = true;
  matched_ = false;
  payload_got_ = 0;
  if (incoming_.flags & kFlagAbort) {
    abort_notice_.assign(incoming_.bytes, '\0');
    abort_notice_got_ = 0;
  }
  return true;
}

// The peer's abort notice: read its reason (a control message, not user payload), then fail.
bool PairChannel::read_abort_notice_locked() {
  while (abort_notice_got_ < abort_notice_.size()) {
    const ssize_t got = ::recv(socket_.get(), abort_notice_.data() + abort_notice_got_,
                               abort_notice_.size() - abort_notice_got_, MSG_DONTWAIT);
    if (got > 0) {
      abort_notice_got_ += static_cast<size_t>(got);
    } else if (got == 0) {
      lost_locked(0, "");
      return true;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return false;
    } else if (errno != EINTR) {
      lost_locked(errno, "receive failed: ");
      return true;
    }
  }
  fail_locked(RINGD_MAKE_ERROR(kPeerLost, "rank " << rank_ << ": peer rank " << peer_ << " ("
                                                  << peer_address_
                                                  << ") aborted: " << abort_notice_));
  return true;
}

bool PairChannel::progress_recv_locked() {
  bool completed = false;
  for (;;) {
    bool made_progress = false;
    if (!have_header_ && !read_header_locked(&made_progress)) return completed;
    if (incoming_.flags & kFlagAbort) return read_abort_notice_locked() || completed;
    if (recvs_.empty()) return completed;  // backpressure: leave the payload in the kernel
    PairOp& op = *recvs_.front();
    if (!matched_) {
      if (incoming_.tag != op.tag || incoming_.bytes != op.bytes) {
        const Error error = RINGD_MAKE_ERROR(
            kMismatch, "rank " << rank_ << ": message mismatch with peer rank " << peer_ << " ("
                               << peer_address_ << "): the next posted receive expects "
                               << describe_tag(op.tag) << ", " << op.bytes << " bytes, but the "
                               << "peer sent " << describe_tag(incoming_.tag) << ", "
                               << incoming_.bytes << " bytes — "
                               << tag_mismatch_cause(op.tag, incoming_.tag));
        // Tell the peer why (it is waiting on this pair too), marked as a mismatch so it fails
        // with kMismatch as well, rather than closing and leaving it a bare reset.
        abort_locked(error, kMismatchAbortMark + std::string(error.what()));
        return true;
      }
      matched_ = true;
    }
    size_t spill = 0;
    if (payload_got_ < op.bytes) {
      // The payload's tail and the next header in one call; the header is not payload.
      iovec pieces[2] = {{op.data + payload_got_, op.bytes - payload_got_},
                         {&incoming_, kHeaderBytes}};
      const ssize_t got = ::readv(socket_.get(), pieces, 2);
      if (got == 0) {
        lost_locked(0, "");
        return true;
      }
      if (got < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return completed;
        lost_locked(errno, "receive failed: ");
        return true;
      }
      const size_t payload = std::min(static_cast<size_t>(got), op.bytes - payload_got_);
      payload_got_ += payload;
      spill = static_cast<size_t>(got) - payload;
      if (payload_got_ < op.bytes) continue;
    }
    op.done = true;
    recvs_.pop_front();
    completed = true;
    have_header_ = false;
    incoming_header_got_ = spill;
  }
}

}  // namespace ringd::tcp
