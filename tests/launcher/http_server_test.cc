// The agent's HTTP endpoint: request-line parsing and real GETs on loopback.
#include "launcher/http_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "transport/tcp/socket.h"

namespace ringd::launcher {
namespace {

std::string get(uint16_t port, const std::string& request) {
  int error = 0;
  const auto deadline = tcp::Clock::now() + std::chrono::seconds(5);
  tcp::Fd fd = tcp::connect_to(tcp::Endpoint{"127.0.0.1", port}, 0, deadline, &error);
  EXPECT_TRUE(fd.valid());
  tcp::send_all(fd.get(), request.data(), request.size(), deadline, &error);
  std::string reply;
  char buffer[4096];
  while (true) {
    const tcp::IoStatus status = tcp::recv_exact(fd.get(), buffer, 1, deadline, &error);
    if (status != tcp::IoStatus::kOk) break;
    reply += buffer[0];
  }
  return reply;
}

TEST(HttpServer, ParsesGetRequestLines) {
  EXPECT_EQ(parse_get_path("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), "/metrics");
  EXPECT_EQ(parse_get_path("GET /readyz?verbose=1 HTTP/1.0\r\n\r\n"), "/readyz");
  EXPECT_EQ(parse_get_path("POST /metrics HTTP/1.1\r\n\r\n"), "");
  EXPECT_EQ(parse_get_path("GET metrics HTTP/1.1\r\n\r\n"), "");
  EXPECT_EQ(parse_get_path("garbage"), "");
}

TEST(HttpServer, AnswersProbesAndRefusesOtherMethods) {
  HttpServer server("127.0.0.1", 0, [](const std::string& path) {
    HttpResponse response;
    if (path == "/healthz") {
      response.body = "ok\n";
    } else {
      response.status = 404;
      response.body = "nope\n";
    }
    return response;
  });
  const std::string ok = get(server.port(), "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("Content-Length: 3\r\n"), std::string::npos) << ok;
  EXPECT_EQ(ok.substr(ok.size() - 3), "ok\n");
  EXPECT_EQ(get(server.port(), "GET /other HTTP/1.1\r\n\r\n").rfind("HTTP/1.0 404", 0), 0u);
  EXPECT_EQ(get(server.port(), "DELETE / HTTP/1.1\r\n\r\n").rfind("HTTP/1.0 405", 0), 0u);
}

}  // namespace
}  // namespace ringd::launcher
