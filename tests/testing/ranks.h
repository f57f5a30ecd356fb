// Test harness: run one function per rank, each rank a thread of this process with its own
// Context, over the inproc transport or real TCP on 127.0.0.1 (one I/O thread per rank). The first
// exception from any rank is rethrown on the calling thread, after every rank has finished.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ringd/inproc.h"
#include "ringd/store.h"
#include "ringd/tcp.h"
#include "ringd/transport.h"

namespace ringd::testing {

enum class Transport { kInproc, kTcp };

inline const char* transport_name(Transport t) {
  return t == Transport::kInproc ? "inproc" : "tcp";
}

// Per-rank exceptions, for tests that expect failures.
struct RankErrors {
  std::vector<std::exception_ptr> errors;
  std::exception_ptr first() const {
    for (const auto& e : errors)
      if (e) return e;
    return nullptr;
  }
};

inline RankErrors run_ranks_collect(Transport transport, int size,
                                    const std::function<void(Context&)>& body,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(30),
                                    InprocHub* hub_override = nullptr) {
  RankErrors result;
  result.errors.resize(size);
  InprocHub local_hub(size);
  InprocHub& hub = hub_override ? *hub_override : local_hub;
  MemoryStore store;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        std::unique_ptr<Context> ctx;
        if (transport == Transport::kInproc) {
          ctx = hub.connect(rank, timeout);
        } else {
          TcpOptions options;
          options.bind_address = "127.0.0.1";
          options.secret = "ringd-test-secret";
          options.timeout = timeout;
          ctx = tcp_connect(store, rank, size, options);
        }
        body(*ctx);
      } catch (...) {
        result.errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return result;
}

inline void run_ranks(Transport transport, int size, const std::function<void(Context&)>& body,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  RankErrors result = run_ranks_collect(transport, size, body, timeout);
  if (auto e = result.first()) std::rethrow_exception(e);
}

}  // namespace ringd::testing
