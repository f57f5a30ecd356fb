// Accepts connections on a listening socket inside an IoLoop and runs each one's handshake
// asynchronously, with its own deadline (Limits::handshake_timeout, a few seconds whatever the
// job's timeout), so a silent, slow or hostile connection never blocks other connections or the
// job. Connections that fail are logged ("rank 0: rejected connection from 127.0.0.1:5555:
// <reason>", rate-limited: see rejection_log.h) and closed; the listening socket stays open until
// close(). Shared by the tcp transport, the TCP store server and the parameter server.
//
// Crowding: at most Limits::max_pending connections are in their handshake at once, and at most
// Limits::max_pending_per_source from one IP address. A newcomer is never refused for lack of
// room: the oldest connection of the address holding the most slots (the newcomer's own address
// when it is over its share) that has not yet sent a valid hello is closed instead ("evicted"), or
// that address's oldest connection when all of them have. A real rank sends its hello as soon as
// it connects, so silent connections, however many and however often re-dialed, cannot keep it
// out; one host's flood cannot take the slots of others. When accept() runs out of descriptors
// (EMFILE/ENFILE) the oldest silent connection is closed to make room, else accepting pauses
// (100 ms doubling to 1 s) instead of spinning; it never aborts.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "net/handshake.h"
#include "net/io_loop.h"
#include "net/rejection_log.h"
#include "net/socket.h"

namespace ringd::net {

// What an Acceptor lets strangers hold (see above).
struct AcceptorLimits {
  size_t max_pending = 128;            // connections in their handshake, in all
  size_t max_pending_per_source = 32;  // ... from one IP address
  std::chrono::milliseconds handshake_timeout = kHandshakeTimeout;
  std::chrono::milliseconds log_interval{10000};  // rejections beyond log_lines are summed up
  size_t log_lines = 10;                          // per log_interval
};

class Acceptor : public IoHandler {
 public:
  struct Callbacks {
    AcceptHandshake::Admit admit;  // after a valid proof: "" admits, else the refusal reason
    // Takes over an admitted, non-blocking socket (the RESULT has been sent).
    std::function<void(Fd socket, const HelloInfo& hello)> on_admitted;
    // Optional: every rejection. `hello` is null when the dialer never sent a valid hello.
    std::function<void(const HelloInfo* hello, ErrorCode code, const std::string& reason)>
        on_rejected;
  };
  using Limits = AcceptorLimits;

  // `self` names the acceptor in log lines ("rank 0", "TCP store server 127.0.0.1:4000").
  Acceptor(IoLoop& loop, Fd listener, std::string secret, int32_t acceptor_rank, std::string self,
           Callbacks callbacks, Limits limits = Limits());
  ~Acceptor() override;
  // Registers the listening socket with the loop.
  void start(const std::shared_ptr<Acceptor>& self_pointer);
  // Closes the listener and every connection still in its handshake. Call after the loop stopped.
  void close();
  void on_io(uint32_t events) override;
  // Log lines about rejected connections so far (loop thread; tests).
  size_t log_lines() const { return log_.lines(); }

 private:
  class Pending;
  void admit_new(Fd socket);
  // Makes room for one more connection from `source`: closes a silent connection (see above).
  void make_room(const std::string& source);
  // Closes one connection that has not sent its hello, oldest first, from `source` ("" = any);
  // false when there is none.
  bool evict_silent(const std::string& source, const std::string& why);
  bool accept_failed(int error);  // true: retry accept() now
  void finish(Pending& pending);
  void log_rejection(const std::string& from, const std::string& reason);
  void schedule_flush();

  IoLoop& loop_;
  Fd listener_;
  const std::string secret_;
  const int32_t acceptor_rank_;
  const std::string self_;
  Callbacks callbacks_;
  const Limits limits_;
  std::weak_ptr<Acceptor> self_pointer_;
  IoLoop::Id listener_id_ = 0;
  // Loop thread only (then close()). Ids grow, so pending_ iterates oldest first.
  std::map<IoLoop::Id, std::shared_ptr<Pending>> pending_;
  std::map<std::string, size_t> pending_per_source_;
  RejectionLog log_;
  std::chrono::milliseconds accept_backoff_{0};  // the last pause after accept() failed
  bool accept_paused_ = false;
};

}  // namespace ringd::net
