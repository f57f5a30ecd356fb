// The agent's HTTP endpoint (launcher/http_server.h), open to anyone who reaches the pod: the
// request line parser, and (mode byte odd) a whole request sent to a running server, whose reply
// must come and the connection end.
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>

#include "fuzz_support.h"
#include "launcher/http_server.h"
#include "net/socket.h"
#include "ringd/error.h"

using namespace ringd;
using namespace std::chrono_literals;

namespace {

// One server for the whole run (it keeps no state between requests).
launcher::HttpServer& server() {
  static launcher::HttpServer instance("127.0.0.1", 0, [](const std::string& path) {
    launcher::HttpResponse response;
    if (path == "/healthz") {
      response.body = "ok\n";
    } else {
      response.status = 404;
      response.body = "not found: " + path + "\n";
    }
    return response;
  });
  return instance;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string request(fuzz::as_text(data + 1, size - 1));
  const std::string path = launcher::parse_get_path(request);
  if (!path.empty() && path[0] != '/') std::abort();
  if (!(data[0] & 1)) return 0;

  const net::Deadline deadline = net::Clock::now() + 5s;
  int error = 0;
  net::Fd fd = net::connect_to(net::Endpoint{"127.0.0.1", server().port()}, net::SocketTuning{},
                               deadline, &error);
  if (!fd.valid()) std::abort();
  net::send_all(fd.get(), request.data(), request.size(), deadline, &error);
  ::shutdown(fd.get(), SHUT_WR);
  std::string reply;
  char buffer[4096];
  for (;;) {
    // The server's own deadline per client is 2 s: past 5 s it has kept a connection open.
    if (net::remaining_ms(deadline) <= 0) std::abort();
    pollfd entry{fd.get(), POLLIN, 0};
    ::poll(&entry, 1, static_cast<int>(net::remaining_ms(deadline)));
    const ssize_t n = ::recv(fd.get(), buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) reply.append(buffer, static_cast<size_t>(n));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
  }
  if (!reply.empty() && reply.rfind("HTTP/1.", 0) != 0) std::abort();
  return 0;
}
