// The rendezvous store's protocol (rendezvous/tcp_store_protocol.h), both ends. Input: a mode
// byte, then what the other end sends.
//   mode 0: a TcpStoreServer (a fresh one per input, holding at most 1 MiB) reads the input as a
//           client's requests after a good handshake; the client then half-closes, and the server
//           must answer what it can and close the connection (no request may keep it waiting on
//           a client that is gone).
//   mode 1: a TcpStore client's get/add/set read the input as the server's responses.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <thread>

#include "fuzz_support.h"
#include "net/acceptor.h"
#include "net/handshake.h"
#include "net/socket.h"
#include "ringd/error.h"
#include "ringd/store.h"

using namespace ringd;
using namespace std::chrono_literals;

namespace {

void server_side(const uint8_t* data, size_t size) {
  TcpStoreServer server("127.0.0.1", 0, "", size_t{1} << 20);
  const net::Deadline deadline = net::Clock::now() + 5s;
  int error = 0;
  net::Fd fd = net::connect_to(net::Endpoint{"127.0.0.1", server.port()}, net::SocketTuning{},
                               deadline, &error);
  if (!fd.valid()) std::abort();
  net::HelloInfo hello;
  hello.kind = net::PeerKind::kStoreClient;
  net::dial_handshake(fd.get(), "", hello, -1, "fuzz store client", "the store", deadline);
  // The server may close early (a malformed request): the rest of the input is then refused.
  net::send_all(fd.get(), data, size, deadline, &error);
  ::shutdown(fd.get(), SHUT_WR);
  uint8_t sink[4096];
  for (;;) {
    if (net::remaining_ms(deadline) <= 0) std::abort();  // the server kept a finished client
    pollfd entry{fd.get(), POLLIN, 0};
    ::poll(&entry, 1, static_cast<int>(net::remaining_ms(deadline)));
    const ssize_t n = ::recv(fd.get(), sink, sizeof(sink), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
  }
}

// A listener that completes the handshake with each client, sends it the input and waits for it
// to close.
void fake_server(int listener, const uint8_t* data, size_t size) {
  for (int connection = 0; connection < 1; ++connection) {
    const int client = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (client < 0) return;
    net::Fd fd(client);
    net::AcceptHandshake handshake("", 0, [](const net::HelloInfo&) { return std::string(); });
    const net::Deadline deadline = net::Clock::now() + 5s;
    while (handshake.advance(fd.get()) == net::AcceptHandshake::State::kInProgress) {
      if (net::remaining_ms(deadline) <= 0) return;
      pollfd entry{fd.get(), POLLIN, 0};
      ::poll(&entry, 1, 100);
    }
    if (handshake.state() != net::AcceptHandshake::State::kAdmitted) return;
    int error = 0;
    net::send_all(fd.get(), data, size, deadline, &error);
    ::shutdown(fd.get(), SHUT_WR);
    uint8_t sink[4096];
    while (net::remaining_ms(deadline) > 0) {
      pollfd entry{fd.get(), POLLIN, 0};
      ::poll(&entry, 1, 100);
      const ssize_t n = ::recv(fd.get(), sink, sizeof(sink), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
    }
  }
}

void client_side(uint8_t operation, const uint8_t* data, size_t size) {
  net::Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener.get(), 4) != 0 ||
      ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    std::abort();
  }
  std::thread server(fake_server, listener.get(), data, size);
  try {
    TcpStore store("127.0.0.1", ntohs(address.sin_port), "", 5s);
    std::vector<uint8_t> existing;
    switch (operation % 3) {
      case 0: store.get("key", 100ms); break;
      case 1: store.add("ringd/job", to_bytes("0123 2"), &existing); break;
      default: store.set("key", to_bytes("value"));
    }
  } catch (const Error& error) {
    if (error.code() == ErrorCode::kTimeout && operation % 3 != 0) std::abort();
  }
  ::shutdown(listener.get(), SHUT_RDWR);
  server.join();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] % 2 == 0) {
    server_side(data + 1, size - 1);
  } else {
    client_side(data[0] >> 1, data + 1, size - 1);
  }
  return 0;
}
