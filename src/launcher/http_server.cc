#include "launcher/http_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <vector>

#include "common/logging.h"
#include "ringd/error.h"

namespace ringd::launcher {
namespace {

// New connections taken per wake-up: fewer than the cap, so that a flood cannot push out a
// connection accepted in the same round before its request was read.
constexpr size_t kMaxAcceptsPerWake = 16;
// accept() failing for lack of resources (EMFILE, ENFILE, ENOBUFS, ENOMEM) leaves the listener
// readable: it is left out of poll() this long instead of spinning on it.
constexpr std::chrono::milliseconds kAcceptPause{100};

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

bool request_complete(const std::string& request) {
  return request.find("\r\n\r\n") != std::string::npos || request.find("\n\n") != std::string::npos;
}

std::string render(const HttpResponse& response) {
  return "HTTP/1.0 " + std::to_string(response.status) + " " + reason_phrase(response.status) +
         "\r\nContent-Type: " + response.content_type +
         "\r\nContent-Length: " + std::to_string(response.body.size()) +
         "\r\nConnection: close\r\n\r\n" + response.body;
}

}  // namespace

// One client: reading its request, then writing the reply; closed when done or at its deadline.
struct HttpServer::Client {
  net::Fd fd;
  net::Deadline deadline;
  std::string request;  // at most kMaxRequestBytes (+ one read)
  std::string reply;    // empty while reading
  size_t sent = 0;
  bool done = false;
};

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
  listener_ = net::listen_on(bind_host, port, {});
  port_ = net::local_port(listener_.get());
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
  std::vector<Client> clients;
  std::vector<pollfd> fds;
  net::Deadline accept_paused_until{};
  bool accept_failing = false;  // logged once per episode
  while (true) {
    const net::Deadline now = net::Clock::now();
    const bool accepting = now >= accept_paused_until;
    fds.assign({{stop_read_.get(), POLLIN, 0}, {accepting ? listener_.get() : -1, POLLIN, 0}});
    net::Deadline wake = accepting ? net::Deadline::max() : accept_paused_until;
    for (const Client& client : clients) {
      fds.push_back(
          {client.fd.get(), static_cast<short>(client.reply.empty() ? POLLIN : POLLOUT), 0});
      wake = std::min(wake, client.deadline);
    }
    const int timeout_ms =
        wake == net::Deadline::max() ? -1 : static_cast<int>(net::remaining_ms(wake) + 1);
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) return;
    if (fds[0].revents) return;
    for (size_t i = 0; i < clients.size(); ++i) {
      if (fds[i + 2].revents) serve(clients[i]);
    }
    const net::Deadline after = net::Clock::now();
    clients.erase(std::remove_if(clients.begin(), clients.end(),
                                 [after](const Client& client) {
                                   return client.done || after >= client.deadline;
                                 }),
                  clients.end());
    if (!(fds[1].revents & POLLIN)) continue;
    for (size_t accepted = 0; accepted < kMaxAcceptsPerWake; ++accepted) {
      net::Fd socket(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!socket.valid()) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          if (!accept_failing) {
            RINGD_LOG(kWarn) << "HTTP server :" << port_ << ": cannot accept connections ("
                             << std::strerror(errno) << "); retrying every " << kAcceptPause.count()
                             << " ms";
          }
          accept_failing = true;
          accept_paused_until = net::Clock::now() + kAcceptPause;
        }
        break;  // EAGAIN: none left; ECONNABORTED, EINTR, ...: the next wake-up
      }
      accept_failing = false;
      if (clients.size() >= kMaxConnections) {
        // Full: the oldest connection still sending its request gives way (idle and slow clients
        // are the old ones); when every one is being answered, the newcomer is refused.
        const auto oldest = std::find_if(clients.begin(), clients.end(),
                                         [](const Client& client) { return client.reply.empty(); });
        if (oldest == clients.end()) continue;  // closes `socket`
        clients.erase(oldest);
      }
      Client client;
      client.fd = std::move(socket);
      client.deadline = net::Clock::now() + kClientDeadline;
      clients.push_back(std::move(client));
    }
  }
}

void HttpServer::serve(Client& client) {
  if (client.reply.empty()) {
    char buffer[1024];
    while (true) {
      const ssize_t got = ::recv(client.fd.get(), buffer, sizeof(buffer), 0);
      if (got > 0) {
        client.request.append(buffer, static_cast<size_t>(got));
        if (client.request.size() > kMaxRequestBytes || request_complete(client.request)) break;
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && errno == EAGAIN) return;  // more later
      if (got < 0 || client.request.empty()) {
        client.done = true;  // reset, or closed without asking anything
        return;
      }
      break;  // a client that sent its request and closed its side still gets an answer
    }
    HttpResponse response;
    if (client.request.size() > kMaxRequestBytes) {
      response.status = 431;
      response.body = "request larger than " + std::to_string(kMaxRequestBytes) + " bytes\n";
    } else if (const std::string path = parse_get_path(client.request); path.empty()) {
      response.status = 405;
      response.body = "only GET is served\n";
    } else {
      try {
        response = handler_(path);
      } catch (const std::exception& error) {
        response = HttpResponse();
        response.status = 500;
        response.body = std::string(error.what()) + "\n";
      }
    }
    client.request = std::string();  // its memory goes back at once
    client.reply = render(response);
  }
  while (client.sent < client.reply.size()) {
    const ssize_t put = ::send(client.fd.get(), client.reply.data() + client.sent,
                               client.reply.size() - client.sent, MSG_NOSIGNAL);
    if (put > 0) {
      client.sent += static_cast<size_t>(put);
    } else if (put < 0 && errno == EINTR) {
      continue;
    } else if (put < 0 && errno == EAGAIN) {
      return;  // POLLOUT next time
    } else {
      break;
    }
  }
  client.done = true;
}

}  // namespace ringd::launcher
