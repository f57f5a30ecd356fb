// The agent's HTTP endpoint for Kubernetes probes and Prometheus: a minimal HTTP/1.0 server that
// answers GET requests and closes each connection. One thread serves every client at once from one
// poll() loop (no thread per client), so an idle, slow or hostile client never delays a probe:
//   - at most kMaxConnections open; a newcomer beyond them pushes out the oldest connection still
//     sending its request (idle and slow clients are the old ones);
//   - a request may hold kMaxRequestBytes (431 beyond), a connection kClientDeadline from accept to
//     the last byte of the reply;
//   - accept() failing for lack of descriptors or memory (EMFILE, ENFILE, ...) pauses accepting for
//     100 ms instead of spinning on the readable listener.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "net/socket.h"

namespace ringd::launcher {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const std::string& path)>;
  // Listens at once (port 0 = any free port); throws ringd::Error(kIo) when the port is taken.
  HttpServer(const std::string& bind_host, uint16_t port, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const { return port_; }
  static constexpr size_t kMaxConnections = 64;
  static constexpr size_t kMaxRequestBytes = 4096;
  static constexpr std::chrono::milliseconds kClientDeadline{2000};

 private:
  struct Client;
  void loop();
  void serve(Client& client);  // reads, answers, writes what the socket takes

  Handler handler_;
  net::Fd listener_;
  uint16_t port_ = 0;
  net::Fd stop_read_;
  net::Fd stop_write_;
  std::thread thread_;
};

// "GET /path HTTP/1.1\r\n..." -> "/path" (query string dropped); "" when not a GET request line.
std::string parse_get_path(const std::string& request);

}  // namespace ringd::launcher
