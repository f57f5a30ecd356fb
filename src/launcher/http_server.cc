#include "launcher/http_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ringd/error.h"

namespace ringd::launcher {
namespace {

constexpr std::chrono::seconds kClientTimeout{2};
constexpr size_t kMaxRequestBytes = 8 << 10;

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

}  // namespace

std::string parse_get_path(const std::string& request) {
  if (request.rfind("GET ", 0) != 0) return "";
  const size_t end = request.find(' ', 4);
  if (end == std::string::npos) return "";
  std::string path = request.substr(4, end - 4);
  path = path.substr(0, path.find('?'));
  return path.empty() || path[0] != '/' ? "" : path;
}

HttpServer::HttpServer(const std::string& bind_host, uint16_t port, Handler handler)
    : handler_(std::move(handler)) {
  listener_ = tcp::listen_on(bind_host, port, 0);
  port_ = tcp::local_port(listener_.get());
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) RINGD_THROW(kIo, "pipe2: " << std::strerror(errno));
  stop_read_.reset(fds[0]);
  stop_write_.reset(fds[1]);
  thread_ = std::thread([this] { loop(); });
}

HttpServer::~HttpServer() {
  const char byte = 1;
  ssize_t ignored = ::write(stop_write_.get(), &byte, 1);
  (void)ignored;
  if (thread_.joinable()) thread_.join();
}

void HttpServer::loop() {
  while (true) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {stop_read_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    tcp::Fd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (client.valid()) answer(client.get());
  }
}

void HttpServer::answer(int fd) {
  const tcp::Deadline deadline = tcp::Clock::now() + kClientTimeout;
  std::string request;
  char buffer[1024];
  while (request.find("\r\n\r\n") == std::string::npos &&
         request.find("\n\n") == std::string::npos) {
    if (request.size() > kMaxRequestBytes) return;
    pollfd entry{fd, POLLIN, 0};
    const int64_t wait_ms = tcp::remaining_ms(deadline);
    if (wait_ms <= 0 || ::poll(&entry, 1, static_cast<int>(wait_ms)) <= 0) return;
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
    if (got <= 0) {
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      break;  // a client that sent its request and closed its side still gets an answer
    }
    request.append(buffer, static_cast<size_t>(got));
  }
  const std::string path = parse_get_path(request);
  HttpResponse response;
  if (path.empty()) {
    response.status = 405;
    response.body = "only GET is served\n";
  } else {
    response = handler_(path);
  }
  const std::string reply = "HTTP/1.0 " + std::to_string(response.status) + " " +
                            reason_phrase(response.status) +
                            "\r\nContent-Type: " + response.content_type +
                            "\r\nContent-Length: " + std::to_string(response.body.size()) +
                            "\r\nConnection: close\r\n\r\n" + response.body;
  int error = 0;
  tcp::send_all(fd, reply.data(), reply.size(), deadline, &error);
}

}  // namespace ringd::launcher
