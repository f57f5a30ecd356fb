// PairChannel's thread-facing half (posting, waiting, failing) and the Pair/Request handles.
// The I/O thread's half is pair_io.cc.
#include "transport/tcp/pair.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>

#include "common/tunables.h"
#include "net/handshake.h"

namespace ringd::tcp {
namespace {

// Best effort: where the kernel refuses, poll() wakes for fewer bytes, which is only slower.
void set_receive_low_water(int fd, int bytes) {
  ::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof(bytes));
}

}  // namespace

PairChannel::PairChannel(int rank, int peer, net::IoLoop& loop)
    : rank_(rank), peer_(peer), loop_(loop) {}

PairChannel::~PairChannel() = default;

void PairChannel::set_peer_address(const std::string& address) {
  std::lock_guard<std::mutex> lock(mutex_);
  peer_address_ = address;
}

std::string PairChannel::description() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return "rank " + std::to_string(peer_) + " (" + peer_address_ + ")";
}

std::string PairChannel::describe_op(const PairOp& op) const {
  return std::to_string(op.bytes) + " bytes (" + describe_tag(op.tag) + ") " +
         (op.is_send ? "to" : "from") + " peer rank " + std::to_string(peer_) + " (" +
         peer_address_ + ")";
}

void PairChannel::attach(net::Fd socket) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) return;  // closed while connecting: drop the socket
    socket_ = std::move(socket);
    read_socket_.reset(::fcntl(socket_.get(), F_DUPFD_CLOEXEC, 0));
    if (!read_socket_.valid()) {
      RINGD_THROW(kIo, "rank " << rank_ << ": cannot duplicate the socket to peer rank " << peer_
                               << ": " << net::errno_text(errno));
    }
    loop_id_ = loop_.add_split(socket_.get(), read_socket_.get(), shared_from_this());
  }
  loop_.wake(loop_id_);
}

std::shared_ptr<PairOp> PairChannel::post(bool is_send, const void* data, size_t bytes,
                                          uint64_t tag) {
  auto op = std::make_shared<PairOp>();
  op->is_send = is_send;
  op->data = static_cast<char*>(const_cast<void*>(data));
  op->bytes = bytes;
  op->tag = tag;
  op->header = MessageHeader{kDataMagic | net::kProtocolVersion, 0, tag, bytes};
  net::IoLoop::Id wake_id = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) {
      op->done = true;
      op->error = failed_;
      return op;
    }
    auto& queue = is_send ? sends_ : recvs_;
    const bool was_empty = queue.empty();
    queue.push_back(op);
    if (was_empty && bytes <= kInlineIoBytes && socket_.valid() && !aborting_ &&
        (is_send || pollers_ == 0)) {
      // Try it now on this thread. Draining to EAGAIN (or to backpressure) is all the
      // edge-triggered loop needs: it is called again on the socket's next edge.
      const bool completed = is_send ? progress_send_locked() : progress_recv_locked();
      if (completed) completed_.notify_all();
      if (!is_send && !op->done) defer_loop_reads_locked();
    } else {
      if (!is_send) restore_loop_reads_locked();  // large or queued: the I/O thread reads
      if (was_empty) wake_id = loop_id_;          // a non-empty queue is being worked on already
    }
  }
  if (wake_id != 0) loop_.wake(wake_id);
  return op;
}

void PairChannel::restore_reads() {
  std::lock_guard<std::mutex> lock(mutex_);
  deferred_ = false;
  if (pollers_ == 0) restore_loop_reads_locked();  // a polling waiter restores on its own
}

void PairChannel::defer_loop_reads_locked() {
  if (failed_ || !socket_.valid()) return;
  if (loop_reads_) loop_reads_ = !loop_.set_read_interest(loop_id_, read_socket_.get(), false);
  if (!loop_reads_ && !deferred_) {
    deferred_ = true;
    loop_.defer_reads(weak_from_this());  // lock order: channel mutex, then the loop's
  }
}

void PairChannel::after_waiter_read_locked() {
  for (const auto& op : recvs_) {
    if (op->bytes > kInlineIoBytes) {
      restore_loop_reads_locked();  // a large receive is queued: the I/O thread's job
      return;
    }
  }
  // Only small receives (or none): the next one's poster or waiter reads, so the I/O thread
  // need not wake for data that arrives before then.
  defer_loop_reads_locked();
}

bool PairChannel::waiter_reads_locked(const PairOp& op) const {
  return !op.done && !op.is_send && op.bytes <= kInlineIoBytes && pollers_ == 0 &&
         socket_.valid() && !failed_ && !aborting_ && !recvs_.empty() &&
         recvs_.front().get() == &op;
}

bool PairChannel::waiter_read_locked(std::unique_lock<std::mutex>& lock, net::Deadline deadline) {
  if (progress_recv_locked()) {
    completed_.notify_all();
    return true;
  }
  if (failed_ || !socket_.valid()) return true;
  if (loop_reads_) loop_reads_ = !loop_.set_read_interest(loop_id_, read_socket_.get(), false);
  // This pair's queued sends (the other half of an exchange) move on this thread too, as soon as
  // the socket takes more, instead of when the I/O thread next gets a core.
  if (progress_send_locked()) completed_.notify_all();
  if (failed_ || !socket_.valid()) return true;
  pollfd readable{socket_.get(),
                  static_cast<short>(POLLIN | POLLRDHUP | (sends_.empty() ? 0 : POLLOUT)), 0};
  // A matched payload with more than kLowWaterMinBytes still to come: sleep until half of that is
  // in the socket (SO_RCVLOWAT), not until the next few packets, and without spinning. Never
  // before the header is matched: a mismatched or abort message must wake this waiter at once.
  // The waiter's own receive is the first one (waiter_reads_locked); at most kInlineIoBytes.
  const size_t to_come = have_header_ && matched_ ? recvs_.front()->bytes - payload_got_ : 0;
  const int low_water = to_come > kLowWaterMinBytes ? static_cast<int>(to_come / 2) : 1;
  if (low_water > 1) set_receive_low_water(socket_.get(), low_water);
  ++pollers_;
  lock.unlock();
  // No polling slices: data, EOF, and close_socket_locked's shutdown() all wake poll, so a
  // missed wake-up would show as a timeout, not as a hidden delay.
  const int wait_ms =
      static_cast<int>(std::clamp<int64_t>(net::remaining_ms(deadline), 0, 1 << 30));
  int ready = 0;
  if (const int spin_us = low_water > 1 ? 0 : tunables().spin_us; spin_us > 0) {
    // RINGD_SPIN_US: look again without blocking, yielding the CPU in between, before sleeping.
    // Bounded, and sched_yield() hands the core to any other runnable rank, so ranks that
    // outnumber the cores still progress; what it saves is the wake-up of an idle core.
    const net::Deadline spin_end = net::Clock::now() + std::chrono::microseconds(spin_us);
    while ((ready = ::poll(&readable, 1, 0)) == 0 && net::Clock::now() < spin_end) sched_yield();
  }
  if (ready == 0) ready = ::poll(&readable, 1, wait_ms);
  lock.lock();
  // Back to 1 before anything else reads: the I/O loop's edge-triggered reads and the next
  // waiter's header must wake for any byte.
  if (low_water > 1 && socket_.valid()) set_receive_low_water(socket_.get(), 1);
  if (--pollers_ == 0) closed_socket_.reset();
  return ready != 0 || net::Clock::now() < deadline;
}

void PairChannel::restore_loop_reads_locked() {
  if (loop_reads_ || !socket_.valid()) return;
  if (loop_.set_read_interest(loop_id_, read_socket_.get(), true)) {
    loop_reads_ = true;
  } else {
    lost_locked(errno, "epoll_ctl(MOD) failed: ");
  }
}

void PairChannel::wait(PairOp& op, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto bounded = std::min<std::chrono::milliseconds>(timeout, std::chrono::hours(24 * 365));
  const net::Deadline deadline = net::Clock::now() + bounded;
  bool in_time = true;
  while (in_time && !op.done) {
    if (waiter_reads_locked(op)) {
      in_time = waiter_read_locked(lock, deadline);
      if (op.done || !waiter_reads_locked(op)) after_waiter_read_locked();
    } else if (loop_.has_deferred_reads() || (!loop_reads_ && pollers_ == 0)) {
      // About to sleep on something the I/O thread must progress: give every socket whose
      // reading was left to a future waiter back to the loop first.
      restore_loop_reads_locked();
      lock.unlock();
      loop_.restore_deferred_reads();
      lock.lock();
    } else {
      in_time =
          completed_.wait_until(lock, deadline, [&] { return op.done || waiter_reads_locked(op); });
    }
  }
  if (!op.done) {
    const Error error = RINGD_MAKE_ERROR(
        kTimeout, "rank " << rank_ << ": timed out after " << timeout.count() << " ms waiting to "
                          << (op.is_send ? "send " : "receive ") << describe_op(op)
                          << " — the peer is stuck, slower than RINGD_TIMEOUT, or running a "
                             "different collective; the connection is now closed");
    fail_locked(error);
    throw error;
  }
  if (op.error) throw *op.error;
}

void PairChannel::close(const Error& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  fail_locked(error);
}

void PairChannel::fail_locked(const Error& error) {
  if (!failed_) fail_requests_locked(error);
  close_socket_locked();
}

void PairChannel::fail_requests_locked(const Error& error) {
  failed_ = error;
  for (auto* queue : {&sends_, &recvs_}) {
    for (auto& op : *queue) {
      op->done = true;
      op->error = error;
    }
    queue->clear();
  }
  completed_.notify_all();
}

void PairChannel::close_socket_locked() {
  aborting_ = false;
  if (socket_.valid() && failed_) {
    // Bytes the peer sent that nobody will read would make close() send a reset, and a reset
    // discards what the peer has not read yet, our abort notice included: read them away first
    // (without blocking; what arrives later may still reset).
    char sink[16384];
    for (int i = 0; i < 64 && ::recv(socket_.get(), sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
    }
  }
  if (socket_.valid()) {
    loop_.remove_fd(read_socket_.get());
    read_socket_.reset();
    loop_.remove(loop_id_, socket_.get());
    if (pollers_ > 0) {
      // A waiter sleeps in poll() on this descriptor: closing it would not wake the waiter and
      // would let the number be reused under it. Shut the connection down (which wakes poll) and
      // leave the close to the last poller.
      ::shutdown(socket_.get(), SHUT_RDWR);
      closed_socket_ = std::move(socket_);
    }
    socket_.reset();
  }
}

void PairChannel::abort(const std::string& reason) noexcept {
  net::IoLoop::Id wake_id = 0;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_ || !socket_.valid()) return;
    const Error error =
        RINGD_MAKE_ERROR(kPeerLost, "rank " << rank_ << ": the pair to peer rank " << peer_ << " ("
                                            << peer_address_ << ") was aborted: " << reason);
    wake_id = abort_locked(error, reason) ? loop_id_ : 0;
  } catch (...) {
    return;  // best effort
  }
  if (wake_id != 0) loop_.wake(wake_id);
}

bool PairChannel::abort_locked(const Error& error, const std::string& reason) {
  // The message partly on the wire must be finished or the stream is corrupt; copy its bytes,
  // since the caller may release its buffers as soon as we return.
  std::shared_ptr<PairOp> partial;
  if (!sends_.empty() && sends_.front()->progress > 0) {
    partial = std::make_shared<PairOp>(*sends_.front());
    partial->owned.assign(partial->data, partial->data + partial->bytes);
    partial->data = partial->owned.data();
  }
  auto notice = std::make_shared<PairOp>();
  notice->is_send = true;
  notice->owned.assign(reason.begin(),
                       reason.begin() + std::min(reason.size(), kMaxAbortReasonBytes));
  notice->data = notice->owned.data();
  notice->bytes = notice->owned.size();
  notice->header = MessageHeader{kDataMagic | net::kProtocolVersion, kFlagAbort, 0, notice->bytes};
  fail_requests_locked(error);  // every user request, pending or future, fails now
  if (partial) sends_.push_back(partial);
  sends_.push_back(notice);
  aborting_ = true;
  // Write now rather than wait for the I/O thread: the process may be about to exit.
  progress_send_locked();
  if (aborting_ && sends_.empty()) {
    ::shutdown(socket_.get(), SHUT_WR);  // FIN after the notice; closed with the context
    aborting_ = false;
  }
  return aborting_;  // the I/O thread must finish writing the notice
}

void PairChannel::flush_abort(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mutex_);
  completed_.wait_for(lock, limit, [&] { return !aborting_ || !socket_.valid(); });
}

}  // namespace ringd::tcp
