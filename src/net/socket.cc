#include "net/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <mutex>
#include <vector>

#include "common/logging.h"
#include "common/text.h"
#include "common/tunables.h"
#include "ringd/error.h"

namespace ringd::net {

int64_t remaining_ms(Deadline deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? left.count() : 0;
}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string errno_text(int error) {
  char buffer[128];
  return strerror_r(error, buffer, sizeof(buffer));  // GNU variant returns the message
}

Endpoint parse_endpoint(const std::string& text, const std::string& what) {
  const size_t colon = text.rfind(':');
  char* end = nullptr;
  const unsigned long port =
      colon == std::string::npos ? 0 : std::strtoul(text.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon == 0 || end == text.c_str() + colon + 1 || *end != '\0' ||
      port == 0 || port > 65535) {
    RINGD_THROW(kProtocol, what << ": '" << text << "' is not a host:port address");
  }
  return Endpoint{text.substr(0, colon), static_cast<uint16_t>(port)};
}

namespace {

bool resolve_ipv4(const std::string& host, in_addr* out) {
  if (::inet_pton(AF_INET, host.c_str(), out) == 1) return true;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* result = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0 || !result) return false;
  *out = reinterpret_cast<sockaddr_in*>(result->ai_addr)->sin_addr;
  ::freeaddrinfo(result);
  return true;
}

std::string format_ipv4(const in_addr& address) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address, text, sizeof(text));
  return text;
}

sockaddr_in make_sockaddr(const std::string& host, uint16_t port, const char* what) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (!resolve_ipv4(host, &address.sin_addr)) {
    RINGD_THROW(kIo, what << ": cannot resolve host '" << host << "' to an IPv4 address");
  }
  return address;
}

}  // namespace

std::string default_host_address(const std::string& interface) {
  if (!interface.empty()) {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) RINGD_THROW(kIo, "getifaddrs failed: " << errno_text(errno));
    std::string found;
    std::string available;
    for (ifaddrs* entry = list; entry; entry = entry->ifa_next) {
      if (!entry->ifa_addr || entry->ifa_addr->sa_family != AF_INET) continue;
      available += std::string(available.empty() ? "" : " ") + entry->ifa_name;
      if (found.empty() && interface == entry->ifa_name) {
        found = format_ipv4(reinterpret_cast<sockaddr_in*>(entry->ifa_addr)->sin_addr);
      }
    }
    ::freeifaddrs(list);
    RINGD_CHECK_ARG(!found.empty(), "network interface '"
                                        << interface
                                        << "' has no IPv4 address on this host; interfaces with "
                                           "one: "
                                        << available << " (set --iface or RINGD_IFACE)");
    return found;
  }
  char name[256] = {};
  in_addr address{};
  if (::gethostname(name, sizeof(name) - 1) == 0 && resolve_ipv4(name, &address)) {
    return format_ipv4(address);
  }
  return "127.0.0.1";
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    RINGD_THROW(kIo, "fcntl(O_NONBLOCK) failed: " << errno_text(errno));
  }
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void set_buffer_sizes(int fd, size_t bytes) {
  if (bytes == 0) return;
  const int value = bytes > (1u << 30) ? (1 << 30) : static_cast<int>(bytes);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, sizeof(value));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, sizeof(value));
}

SocketTuning data_socket_tuning() {
  return SocketTuning{tunables().socket_buffer_bytes, congestion_setting(tunables().tcp_congestion),
                      tunables().tcp_congestion_chosen};
}

std::string congestion_setting(const std::string& value) {
  return value == "system" ? std::string() : value;
}

namespace {

std::string proc_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line) || line.empty())
    return "(unknown: cannot read " + std::string(path) + ")";
  return line;
}

}  // namespace

void set_congestion_control(int fd, const std::string& name, bool required) {
  if (name.empty()) return;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                   static_cast<socklen_t>(name.size())) == 0) {
    return;
  }
  const int error = errno;
  const std::string offered =
      "available: " + proc_line("/proc/sys/net/ipv4/tcp_available_congestion_control") +
      "; allowed without CAP_NET_ADMIN: " +
      proc_line("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
  if (required) {
    RINGD_THROW(kInvalidArgument,
                "RINGD_TCP_CONGESTION: the kernel refuses TCP congestion control '"
                    << name << "' (" << errno_text(error) << "); " << offered
                    << " — choose one of those, or RINGD_TCP_CONGESTION=system "
                       "for the kernel's default");
  }
  static std::once_flag warned;
  std::call_once(warned, [&] {
    RINGD_LOG(kWarn) << "tcp: the kernel refuses ringd's default congestion control '" << name
                     << "' (" << errno_text(error) << "; " << offered
                     << "): the job's connections keep the kernel's default; "
                        "RINGD_TCP_CONGESTION=system says so without this warning";
  });
}

Fd listen_on(const std::string& host, uint16_t port, const SocketTuning& tuning) {
  const std::string where = host + ":" + std::to_string(port);
  const sockaddr_in address = make_sockaddr(host, port, "listen");
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid())
    RINGD_THROW(kIo, "socket() for listening on " << where << ": " << errno_text(errno));
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  // Before listen(), so that accepted sockets inherit both.
  set_buffer_sizes(fd.get(), tuning.buffer_bytes);
  set_congestion_control(fd.get(), tuning.congestion, tuning.congestion_required);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    RINGD_THROW(kIo, "cannot listen on " << where << ": bind: " << errno_text(errno)
                                         << " (is the port in use? use port 0 for any free port)");
  }
  if (::listen(fd.get(), 512) != 0) {
    RINGD_THROW(kIo, "cannot listen on " << where << ": " << errno_text(errno));
  }
  return fd;
}

uint16_t local_port(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  return ntohs(address.sin_port);
}

std::string remote_address(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      address.sin_family != AF_INET) {
    return "unknown peer";
  }
  return format_ipv4(address.sin_addr) + ":" + std::to_string(ntohs(address.sin_port));
}

Fd connect_to(const Endpoint& endpoint, const SocketTuning& tuning, Deadline deadline, int* error) {
  const sockaddr_in address = make_sockaddr(endpoint.host, endpoint.port, "connect");
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid())
    RINGD_THROW(kIo,
                "socket() for connecting to " << endpoint.to_string() << ": " << errno_text(errno));
  set_buffer_sizes(fd.get(), tuning.buffer_bytes);
  set_congestion_control(fd.get(), tuning.congestion, tuning.congestion_required);
  *error = 0;
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    if (errno != EINPROGRESS) {
      *error = errno;
      return Fd();
    }
    pollfd entry{fd.get(), POLLOUT, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(remaining_ms(deadline)));
    if (ready <= 0) {
      *error = ready == 0 ? ETIMEDOUT : errno;
      return Fd();
    }
    socklen_t length = sizeof(*error);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, error, &length);
    if (*error != 0) return Fd();
  }
  set_nodelay(fd.get());
  return fd;
}

namespace {

// Waits until `fd` is ready for `events` or the deadline passes.
IoStatus wait_ready(int fd, short events, Deadline deadline, int* error) {
  for (;;) {
    const int64_t left = remaining_ms(deadline);
    if (left <= 0) return IoStatus::kTimeout;
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready > 0) return IoStatus::kOk;
    if (ready < 0 && errno != EINTR) {
      *error = errno;
      return IoStatus::kError;
    }
  }
}

}  // namespace

namespace {

// send_all/recv_exact and their _idle forms: `idle` > 0 moves the deadline on after each progress.
IoStatus send_loop(int fd, const char* cursor, size_t bytes, Deadline deadline,
                   std::chrono::milliseconds idle, int* error) {
  while (bytes > 0) {
    const ssize_t sent = ::send(fd, cursor, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      cursor += sent;
      bytes -= static_cast<size_t>(sent);
      if (idle.count() > 0) deadline = Clock::now() + idle;
    } else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const IoStatus status = wait_ready(fd, POLLOUT, deadline, error);
      if (status != IoStatus::kOk) return status;
    } else if (sent < 0 && errno != EINTR) {
      *error = errno;
      return (errno == EPIPE || errno == ECONNRESET) ? IoStatus::kClosed : IoStatus::kError;
    }
  }
  return IoStatus::kOk;
}

IoStatus recv_loop(int fd, char* cursor, size_t bytes, Deadline deadline,
                   std::chrono::milliseconds idle, int* error) {
  while (bytes > 0) {
    const ssize_t got = ::recv(fd, cursor, bytes, MSG_DONTWAIT);
    if (got > 0) {
      cursor += got;
      bytes -= static_cast<size_t>(got);
      if (idle.count() > 0) deadline = Clock::now() + idle;
    } else if (got == 0) {
      *error = 0;
      return IoStatus::kClosed;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      const IoStatus status = wait_ready(fd, POLLIN, deadline, error);
      if (status != IoStatus::kOk) return status;
    } else if (errno != EINTR) {
      *error = errno;
      return errno == ECONNRESET ? IoStatus::kClosed : IoStatus::kError;
    }
  }
  return IoStatus::kOk;
}

}  // namespace

IoStatus send_all(int fd, const void* data, size_t bytes, Deadline deadline, int* error) {
  return send_loop(fd, static_cast<const char*>(data), bytes, deadline,
                   std::chrono::milliseconds(0), error);
}

IoStatus recv_exact(int fd, void* data, size_t bytes, Deadline deadline, int* error) {
  return recv_loop(fd, static_cast<char*>(data), bytes, deadline, std::chrono::milliseconds(0),
                   error);
}

IoStatus send_all_idle(int fd, const void* data, size_t bytes, std::chrono::milliseconds idle,
                       int* error) {
  return send_loop(fd, static_cast<const char*>(data), bytes, Clock::now() + idle, idle, error);
}

IoStatus recv_exact_idle(int fd, void* data, size_t bytes, std::chrono::milliseconds idle,
                         int* error) {
  return recv_loop(fd, static_cast<char*>(data), bytes, Clock::now() + idle, idle, error);
}

bool send_immediately(int fd, const void* data, size_t bytes) {
  const char* cursor = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t sent = ::send(fd, cursor, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    cursor += sent;
    bytes -= static_cast<size_t>(sent);
  }
  return true;
}

std::string io_status_text(IoStatus status, int error) {
  switch (status) {
    case IoStatus::kOk: return "ok";
    case IoStatus::kTimeout: return "timed out";
    case IoStatus::kClosed:
      return error ? "connection lost (" + errno_text(error) + ")" : "connection closed by peer";
    case IoStatus::kError: return errno_text(error);
  }
  return "unknown";
}

std::string random_hex(size_t bytes) {
  std::vector<unsigned char> random(bytes);
  random_bytes(random.data(), bytes);
  return hex(random.data(), bytes);
}

void random_bytes(void* out, size_t bytes) {
  char* cursor = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t got = ::getrandom(cursor, bytes, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      RINGD_THROW(kIo, "getrandom failed: " << errno_text(errno));
    }
    cursor += got;
    bytes -= static_cast<size_t>(got);
  }
}

}  // namespace ringd::net
