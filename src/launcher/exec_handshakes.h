// The exec service's connections that have not proved the job secret yet. The acceptor's one
// thread carries all of them through the handshake (exec::ServerHandshake) with non-blocking
// reads, so a silent or slow client costs one file descriptor and a few hundred bytes, never a
// thread, and is dropped at its own deadline.
//
// Bounded per source address and in total. A new connection beyond a bound pushes out the oldest
// connection of its own source (at the per-source bound) or of the busiest source (at the total
// bound): a flood from one address never keeps another address's caller out, and the newest
// connection, the one likeliest to be a real caller, always gets its chance (a real handshake
// takes one round trip).
//
// The table also turns away authenticated callers the service has no thread for (its connection
// cap, or thread creation failing): it sends the refusal, reads and discards the caller's first
// frame and closes, so the caller reads the reason instead of a connection reset.
#pragma once

#include <poll.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "launcher/exec_protocol.h"
#include "net/socket.h"

namespace ringd::launcher {

struct HandshakeLimits {
  size_t max_total = 64;
  size_t max_per_source = 8;
  std::chrono::milliseconds timeout{5000};  // from accept to the first message
};

// A caller that proved the secret; its first message is due by `deadline`.
struct Authenticated {
  net::Fd fd;
  std::string caller;  // "exec caller ADDRESS:PORT"
  exec::SessionKeys keys;
  net::Deadline deadline;
};

// A connection the table gave up on.
struct DroppedHandshake {
  std::string caller;
  std::string reason;
  bool quiet = true;          // silent, slow, closed or pushed out (not a wrong secret)
  bool auth_failure = false;  // proved another secret (kAuth)
};

class PendingHandshakes {
 public:
  PendingHandshakes(const std::string& secret, HandshakeLimits limits);
  ~PendingHandshakes();
  PendingHandshakes(const PendingHandshakes&) = delete;
  PendingHandshakes& operator=(const PendingHandshakes&) = delete;

  // A connection just accepted; what it pushed out goes to `dropped`.
  void add(net::Fd fd, std::vector<DroppedHandshake>* dropped);
  // Sends `reason` (kRefused) to an authenticated caller, then closes once its first frame is read.
  void refuse(Authenticated connection, const std::string& reason);

  size_t size() const { return entries_.size(); }
  // One pollfd per connection, in the order advance() expects; no add() or refuse() in between.
  void append_pollfds(std::vector<pollfd>* fds) const;
  // After poll(): moves each connection on by what `fds` (this table's part) says is ready, drops
  // those past their deadline, and hands out those that finished their handshake.
  void advance(const pollfd* fds, std::vector<Authenticated>* done,
               std::vector<DroppedHandshake>* dropped);
  // Milliseconds until the nearest deadline; -1 when empty.
  int timeout_ms() const;

 private:
  struct Entry;
  void push_out(size_t index, const std::string& why, std::vector<DroppedHandshake>* dropped);
  // Reads and answers what is there; false when the entry is finished (done, dropped or closed).
  bool step(Entry* entry, short revents, std::vector<Authenticated>* done,
            std::vector<DroppedHandshake>* dropped);

  const std::string& secret_;
  HandshakeLimits limits_;
  std::vector<std::unique_ptr<Entry>> entries_;  // oldest first
};

}  // namespace ringd::launcher
