// Helpers for the tcp transport tests: one thread per rank in this process, a shared MemoryStore,
// loopback only.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/socket.h"
#include "ringd/error.h"
#include "ringd/store.h"
#include "ringd/tcp.h"
#include "ringd/transport.h"

namespace ringd::testing {

inline TcpOptions loopback_options(std::chrono::milliseconds timeout = std::chrono::seconds(20),
                                   const std::string& secret = "test-secret") {
  TcpOptions options;
  options.bind_address = "127.0.0.1";
  options.secret = secret;
  options.timeout = timeout;
  return options;
}

// Runs body(rank) on `size` threads and rethrows the first exception any of them threw.
inline void run_ranks(int size, const std::function<void(int rank)>& body) {
  std::mutex mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (first) std::rethrow_exception(first);
}

// Connects `size` ranks over loopback (each rank's tcp_connect on its own thread).
inline std::vector<std::unique_ptr<Context>> connect_ranks(
    int size, Store& store, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  std::vector<std::unique_ptr<Context>> contexts(size);
  run_ranks(size, [&](int rank) {
    contexts[rank] = tcp_connect(store, rank, size, loopback_options(timeout));
  });
  return contexts;
}

// Runs `body` and returns the ringd::Error it throws (fails the test if it throws nothing).
template <typename Body>
Error expect_error(Body&& body) {
  try {
    body();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "expected a ringd::Error";
  return Error(ErrorCode::kInternal, "nothing thrown");
}

// A deadline `delay` from now.
inline net::Deadline in(std::chrono::milliseconds delay) { return net::Clock::now() + delay; }

// True once the other side closed the connection (EOF or reset) before `deadline`.
inline bool closed_by_peer(int fd, net::Deadline deadline) {
  char sink[4096];
  for (;;) {
    pollfd entry{fd, POLLIN, 0};
    if (::poll(&entry, 1, static_cast<int>(net::remaining_ms(deadline))) <= 0) return false;
    const ssize_t got = ::recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
}

// `count` connections to `endpoint` that never send a byte, each re-dialed as soon as the other
// side closes it, until destroyed: the idle flood of issue 15 (200 silent connections held open to
// rank 0's rendezvous port kept every rank out).
class SilentFlood {
 public:
  SilentFlood(net::Endpoint endpoint, size_t count) : endpoint_(std::move(endpoint)) {
    for (size_t i = 0; i < count; ++i) sockets_.push_back(dial());
    thread_ = std::thread([this] { run(); });
  }
  ~SilentFlood() {
    stop_ = true;
    thread_.join();
  }
  size_t redials() const { return redials_.load(); }

 private:
  net::Fd dial() {
    int error = 0;
    return net::connect_to(endpoint_, {}, in(std::chrono::milliseconds(2000)), &error);
  }
  void run() {
    while (!stop_) {
      std::vector<pollfd> entries;
      for (auto& socket : sockets_) entries.push_back({socket.get(), POLLIN, 0});
      ::poll(entries.data(), entries.size(), 20);
      for (size_t i = 0; i < sockets_.size(); ++i) {
        if (entries[i].revents == 0 && entries[i].fd >= 0) continue;
        char sink[256];
        const ssize_t got = ::recv(sockets_[i].get(), sink, sizeof(sink), MSG_DONTWAIT);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
          sockets_[i] = dial();
          ++redials_;
        }
      }
    }
  }

  const net::Endpoint endpoint_;
  std::vector<net::Fd> sockets_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> redials_{0};
  std::thread thread_;
};

// Lines of `log` that contain `part`.
inline size_t count_lines(const std::string& log, const std::string& part) {
  size_t count = 0;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    if (log.substr(start, end - start).find(part) != std::string::npos) ++count;
    start = end + 1;
  }
  return count;
}

}  // namespace ringd::testing

// EXPECT_THAT(text, HasSubstr(part)) without gmock.
#define RINGD_EXPECT_CONTAINS(text, part)                    \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "expected to find \"" << (part) << "\" in:\n"       \
      << (text)
