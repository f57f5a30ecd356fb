// The agent's HTTP endpoint for Kubernetes probes and Prometheus: a minimal HTTP/1.0 server on one
// thread that answers GET requests one at a time (probes and scrapes are rare and tiny) and closes
// each connection. It sleeps in poll(); a slow or silent client is dropped after two seconds.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "transport/tcp/socket.h"

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

 private:
  void loop();
  void answer(int fd);

  Handler handler_;
  tcp::Fd listener_;
  uint16_t port_ = 0;
  tcp::Fd stop_read_;
  tcp::Fd stop_write_;
  std::thread thread_;
};

// "GET /path HTTP/1.1\r\n..." -> "/path" (query string dropped); "" when not a GET request line.
std::string parse_get_path(const std::string& request);

}  // namespace ringd::launcher
