// Small POSIX socket helpers shared by the tcp transport and the TCP store: an owning fd, IPv4
// listen/connect, socket options, and blocking-with-deadline I/O on non-blocking sockets (poll, no
// spinning) for the handshake and the store client. Everything here is IPv4.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ringd::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Milliseconds left until `deadline` (0 when passed).
int64_t remaining_ms(Deadline deadline);

// Owns a file descriptor; closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct Endpoint {
  std::string host;  // dotted IPv4 or a resolvable name
  uint16_t port = 0;
  std::string to_string() const { return host + ":" + std::to_string(port); }
};

// "host:port" -> Endpoint; throws ringd::Error(kProtocol) naming `what` when malformed.
Endpoint parse_endpoint(const std::string& text, const std::string& what);

// The IPv4 address of `interface` (e.g. "eth0"), else of this host's name, else 127.0.0.1.
// Throws kInvalidArgument when a named interface has no IPv4 address.
std::string default_host_address(const std::string& interface);

void set_nonblocking(int fd);
void set_nodelay(int fd);
// SO_SNDBUF and SO_RCVBUF; 0 leaves kernel autotuning on.
void set_buffer_sizes(int fd, size_t bytes);

// How a socket is set up before listen() or connect(); accepted sockets inherit it from their
// listener.
struct SocketTuning {
  size_t buffer_bytes = 0;  // SO_SNDBUF/SO_RCVBUF; 0 = kernel autotuning
  std::string congestion;   // TCP_CONGESTION (e.g. "reno"); empty = the kernel's default
  // Whether the kernel refusing `congestion` is an error (someone chose it) or one warning per
  // process (ringd's default, on a kernel or sandbox without it).
  bool congestion_required = true;
};
// The job's data connections (collective pairs, parameter-server links):
// RINGD_SOCKET_BUFFER_BYTES and RINGD_TCP_CONGESTION ("system" = empty; required when set).
SocketTuning data_socket_tuning();
// RINGD_TCP_CONGESTION's value as SocketTuning::congestion: "system" -> "" (the kernel's default).
std::string congestion_setting(const std::string& value);
// TCP_CONGESTION; nothing for an empty name. When the kernel refuses it (not built or loaded; not
// allowed for an unprivileged process): throws ringd::Error(kInvalidArgument) naming the
// algorithm, what the kernel offers (/proc/sys/net/ipv4/tcp_available_congestion_control) and
// RINGD_TCP_CONGESTION, or, when not `required`, logs that once per process and leaves the
// socket with the kernel's default.
void set_congestion_control(int fd, const std::string& name, bool required);

// A non-blocking listening socket with SO_REUSEADDR on host:port (port 0 = any free port).
// Throws ringd::Error(kIo) naming the address.
Fd listen_on(const std::string& host, uint16_t port, const SocketTuning& tuning);
uint16_t local_port(int fd);
// "a.b.c.d:port" of the connected peer, or "unknown peer".
std::string remote_address(int fd);

// Connects a new non-blocking socket to `endpoint`, waiting until `deadline`. Returns an invalid
// Fd and sets *error (errno, ETIMEDOUT at the deadline) when the attempt failed.
Fd connect_to(const Endpoint& endpoint, const SocketTuning& tuning, Deadline deadline, int* error);

// Blocking-style I/O on a non-blocking socket: waits in poll() until done or `deadline`.
enum class IoStatus { kOk, kClosed, kTimeout, kError };
IoStatus send_all(int fd, const void* data, size_t bytes, Deadline deadline, int* error);
IoStatus recv_exact(int fd, void* data, size_t bytes, Deadline deadline, int* error);
// The same with `idle` bounding each silence instead of the whole transfer: the deadline moves to
// now + idle whenever bytes move (kTimeout only after `idle` without progress). For transfers whose
// length depends on a shared link: 400 MB to one of eight peers behind 1 Gbit/s takes 30 s.
IoStatus send_all_idle(int fd, const void* data, size_t bytes, std::chrono::milliseconds idle,
                       int* error);
IoStatus recv_exact_idle(int fd, void* data, size_t bytes, std::chrono::milliseconds idle,
                         int* error);
// One non-blocking attempt to send all of a small message (handshake replies fit a fresh socket's
// buffer); false when it did not all go out.
bool send_immediately(int fd, const void* data, size_t bytes);
// "connection closed by peer", "timed out", or strerror(error).
std::string io_status_text(IoStatus status, int error);

std::string errno_text(int error);

// Fills `out` from the kernel's random pool (getrandom); throws ringd::Error(kIo) on failure.
void random_bytes(void* out, size_t bytes);
// `bytes` random bytes as 2 x `bytes` lower-case hex digits (job ids, generated job secrets).
std::string random_hex(size_t bytes);

}  // namespace ringd::net
