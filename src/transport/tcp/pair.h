// One rank-to-rank TCP connection after its handshake.
//
// Data messages (both directions, independently: full duplex):
//   MessageHeader {magic/version u32, flags u32, tag u64, bytes u64} (24 bytes, little-endian),
//   then `bytes` of payload.
//
// Socket I/O always happens under the channel's mutex, by whichever thread holds it. Large
// messages are moved by the I/O thread; isend/irecv only queue them (waking the loop when the
// queue was empty). Messages of at most kInlineIoBytes ("small" below; 4 MiB: every ring segment
// and most halving-doubling steps) skip the I/O thread on the critical path, because every thread
// hand-off is a context switch and ranks outnumber cores (at 10 Gbit/s on 4 emulated nodes a
// 64 KiB limit took 1 MB allreduces from 3.7-4.0 to 5.1-5.4 ms; docs/performance.md):
//   * a small isend/irecv posted to an idle queue is tried at once on the posting thread; when a
//     small receive cannot complete yet, the loop's EPOLLIN interest on the socket is switched
//     off (IoLoop::defer_reads): its waiter, expected soon, will read it. It stays off after
//     that waiter is done unless a large receive is queued, so data arriving before the next
//     receive is posted does not wake the I/O thread either;
//   * the thread waiting for a small receive at the head of the queue reads the socket itself,
//     in poll() on it (after up to RINGD_SPIN_US of non-blocking looks, yielding the core in
//     between; a long payload under way instead sleeps until half of its rest is in the socket,
//     kLowWaterMinBytes) instead of the I/O thread waking up to read and then waking it. It
//     also writes the pair's queued sends (polling for POLLOUT while any are left), so both
//     halves of an exchange move on the thread that waits for it. on_io leaves reading to such
//     a waiter.
//     Read interest comes back on when that wait ends, when a large receive is posted, and
//     before any thread of the context sleeps on anything else
//     (IoLoop::restore_deferred_reads), so a blocked thread never leaves a socket unread. Per
//     exchange of a small message that is one wake-up, not three.
// The state machine is the same for every thread:
//   * sends: sendmsg() of header + payload straight from the caller's buffer (several queued
//     messages per call, up to kMaxSendIovecs pieces), resumed after partial writes; MSG_EOR
//     marks the end of each call's last message, so that the kernel sends its tail at once
//     instead of holding it back for more (TCP autocorking; see pair_io.cc);
//   * receives: read a header, match it against the FIRST posted receive (same tag and byte count,
//     else kMismatch), then read the payload straight into that receive's buffer. A header that
//     arrives before any receive is posted stops reading on this socket until one is posted: the
//     payload stays in the kernel (backpressure), never in a user-space buffer.
// The first failure (peer lost, corrupt stream, mismatch, a timed-out wait) fails the whole pair:
// the socket is closed, so no buffer is touched afterwards, and every pending and future request
// throws that error.
//
// abort(reason) (Pair::abort) sends a control message with flags = kFlagAbort and the reason as
// payload (at most kMaxAbortReasonBytes) after whatever message is partly on the wire (its rest is
// copied, so the caller may free its buffers), then shuts the connection down. The peer reads it
// even with no receive posted and fails the pair with kPeerLost "peer rank P (...) aborted:
// <reason>", so the root cause of a failure travels from rank to rank.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "net/io_loop.h"
#include "net/socket.h"
#include "ringd/error.h"
#include "ringd/transport.h"
#include "transport/channel_pair.h"
#include "transport/error_text.h"

namespace ringd::tcp {

struct MessageHeader {
  uint32_t magic_version;
  uint32_t flags;
  uint64_t tag;
  uint64_t bytes;
};
static_assert(sizeof(MessageHeader) == 24, "MessageHeader is 24 bytes on the wire");
constexpr uint32_t kDataMagic = 0x52440000u;  // "RD" + protocol version in the low 16 bits
constexpr uint32_t kFlagAbort = 1;            // the payload is the sender's reason for giving up
constexpr size_t kMaxAbortReasonBytes = 4096;
// Messages up to this size are sent and received on the posting/waiting thread (see above).
constexpr size_t kInlineIoBytes = 4 * 1024 * 1024;
// A waiter whose matched payload has more than this still to come sleeps until half of it has
// arrived (SO_RCVLOWAT), then reads it all at once, instead of spinning and waking for every few
// packets: a 1 MiB segment at 1 Gbit/s took dozens of wake-ups and RINGD_SPIN_US spins, each
// mostly idle (docs/performance.md, "Waking for half of what is to come"). The kernel caps the
// mark at half the receive buffer, so a long message never waits on bytes that cannot fit.
constexpr size_t kLowWaterMinBytes = 64 * 1024;

// One isend or irecv. Fields other than data/bytes/tag/header belong to the channel's mutex.
struct PairOp {
  bool is_send = false;
  char* data = nullptr;
  size_t bytes = 0;
  uint64_t tag = 0;
  MessageHeader header{};  // sends: what goes on the wire before the payload
  size_t progress = 0;     // sends: header + payload bytes written
  bool done = false;
  std::optional<Error> error;
  std::vector<char> owned;  // internal sends (abort notice, copied rest of a partial message)
};

class PairChannel : public net::IoHandler, public std::enable_shared_from_this<PairChannel> {
 public:
  static constexpr const char* kTransport = "tcp";
  PairChannel(int rank, int peer, net::IoLoop& loop);
  ~PairChannel() override;

  // "rank 3 (10.0.0.4:41000)". The address is the peer's advertised listening address.
  void set_peer_address(const std::string& address);
  std::string description() const;
  int peer() const { return peer_; }

  // Takes over the connected, authenticated socket and starts serving it on the loop.
  void attach(net::Fd socket);
  std::shared_ptr<PairOp> post(bool is_send, const void* data, size_t bytes, uint64_t tag);
  // Blocks (condition variable) until `op` is done; throws its error, or kTimeout (which fails
  // the pair) after `timeout`.
  void wait(PairOp& op, std::chrono::milliseconds timeout);
  // Fails the pair with `error` and closes the socket. Any thread.
  void close(const Error& error);
  // Tells the peer why this rank gives up (see above); never throws. Any thread.
  void abort(const std::string& reason) noexcept;
  // Blocks until a pending abort notice has been written (or the pair closed), at most `limit`.
  void flush_abort(std::chrono::milliseconds limit);

  void on_io(uint32_t events) override;  // the loop thread
  void restore_reads() override;         // net::IoLoop::restore_deferred_reads

 private:
  void fail_locked(const Error& error);
  // Fails every request with `error` and queues an abort notice carrying `reason` to the peer
  // (written at once as far as the socket takes it); true while the I/O thread must finish it.
  bool abort_locked(const Error& error, const std::string& reason);
  // Records `error` as the pair's failure and fails every queued request with it.
  void fail_requests_locked(const Error& error);
  void close_socket_locked();
  bool read_abort_notice_locked();  // true when the pair failed (the notice is complete)
  // Whether the waiting thread may read the socket itself for `op` (see above).
  bool waiter_reads_locked(const PairOp& op) const;
  // One round of waiter-driven reading: progress, else sleep in poll() until the socket is
  // readable or `deadline`. Returns false at the deadline.
  bool waiter_read_locked(std::unique_lock<std::mutex>& lock, net::Deadline deadline);
  // Read interest of the I/O loop on this socket: back on; off and recorded with
  // IoLoop::defer_reads; and the choice between the two when a waiter is done reading.
  void restore_loop_reads_locked();
  void defer_loop_reads_locked();
  void after_waiter_read_locked();
  bool progress_send_locked();  // returns whether an operation completed
  bool progress_recv_locked();
  bool read_header_locked(bool* made_progress);
  void lost_locked(int error, const char* what);
  std::string describe_op(const PairOp& op) const;

  const int rank_;
  const int peer_;
  net::IoLoop& loop_;
  mutable std::mutex mutex_;
  std::condition_variable completed_;
  std::string peer_address_;
  net::Fd socket_;
  net::Fd
      read_socket_;  // a dup of socket_: the I/O loop's read registration (net::IoLoop::add_split)
  int pollers_ = 0;  // threads in poll() on socket_ (with the mutex released)
  bool loop_reads_ = true;  // whether the I/O loop is woken when socket_ becomes readable
  bool deferred_ = false;   // registered with net::IoLoop::defer_reads since the last restore_reads
  net::Fd closed_socket_;   // closed while polled: shut down, released by the last poller
  net::IoLoop::Id loop_id_ = 0;
  std::optional<Error> failed_;
  bool aborting_ = false;  // failed_ is set but the abort notice is still being written
  std::string abort_notice_;
  size_t abort_notice_got_ = 0;
  std::deque<std::shared_ptr<PairOp>> sends_;
  std::deque<std::shared_ptr<PairOp>> recvs_;
  // Receive state: the next message's header (possibly partly read) and the matched payload.
  MessageHeader incoming_{};
  size_t incoming_header_got_ = 0;
  bool have_header_ = false;
  bool matched_ = false;
  size_t payload_got_ = 0;
};

// The ringd::Pair handed to Context (transport/channel_pair.h). Destroying it closes the
// connection.
using TcpPair = ChannelPair<PairChannel>;

}  // namespace ringd::tcp
