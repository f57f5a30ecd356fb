// Accepts connections on a listening socket inside an IoLoop and runs each one's handshake
// asynchronously, with its own deadline (kHandshakeTimeout), so a silent, slow or hostile
// connection never blocks other connections or the job. Connections that fail are logged
// ("rank 0: rejected connection from 127.0.0.1:5555: <reason>") and closed; the listening socket
// stays open until close(). Shared by the tcp transport and the TCP store server.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "transport/tcp/handshake.h"
#include "transport/tcp/io_loop.h"
#include "transport/tcp/socket.h"

namespace ringd::tcp {

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

  // `self` names the acceptor in log lines ("rank 0", "TCP store server 127.0.0.1:4000").
  Acceptor(IoLoop& loop, Fd listener, std::string secret, int32_t acceptor_rank, std::string self,
           Callbacks callbacks);
  ~Acceptor() override;
  // Registers the listening socket with the loop.
  void start(const std::shared_ptr<Acceptor>& self_pointer);
  // Closes the listener and every connection still in its handshake. Call after the loop stopped.
  void close();
  void on_io(uint32_t events) override;

 private:
  class Pending;
  void finish(Pending& pending);

  IoLoop& loop_;
  Fd listener_;
  const std::string secret_;
  const int32_t acceptor_rank_;
  const std::string self_;
  Callbacks callbacks_;
  std::map<IoLoop::Id, std::shared_ptr<Pending>> pending_;  // loop thread only (then close())
};

}  // namespace ringd::tcp
