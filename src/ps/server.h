// A parameter server: holds its shard of the variables (ShardStore) and serves workers over TCP.
// One listening socket; the job-secret handshake runs in an I/O loop (net/acceptor.h);
// each admitted worker then gets a thread that blocks in poll() on its socket (and on a stop
// eventfd) and answers its frames in order: REGISTER, INIT, PUSH, PULL, BYE. W workers x k servers
// connections, all asleep while nothing arrives. At most max_connections threads at once; a thread
// whose connection ended is joined at the next admission (or by the destructor).
//
// Used by `ringd ps` (servers on their own nodes) and by `ringd train --mode ps` when the worker
// process also hosts a shard (co-located). See docs/architecture.md, "Parameter-server mode".
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ringd::ps {

// The default cap on a server's connections (and so its connection threads).
constexpr size_t kMaxConnections = 1024;

struct ServerOptions {
  std::string host = "0.0.0.0";  // listen address
  uint16_t port = 0;             // 0 = any free port
  std::string advertise_host;    // host part of address() (default: host, or this host's address)
  std::string secret;            // job secret ("" = RINGD_JOB_SECRET / _FILE)
  std::chrono::milliseconds timeout{0};  // how long a pull waits for a step (0 = RINGD_TIMEOUT)
  // Connections served at once, each by a thread of its own; beyond it a worker is refused in the
  // handshake, naming the limit (docs/errors.md). One per worker is what a job needs.
  size_t max_connections = kMaxConnections;
};

class ParameterServer {
 public:
  explicit ParameterServer(const ServerOptions& options);  // listening when it returns
  ~ParameterServer();
  ParameterServer(const ParameterServer&) = delete;
  ParameterServer& operator=(const ParameterServer&) = delete;

  uint16_t port() const;
  std::string address() const;  // "host:port" for workers

  // Blocks until every worker of the job has said BYE; throws the job's failure (a lost worker,
  // naming it) instead, or kTimeout when no worker was heard from for `idle_limit` (0 = never).
  void wait_until_done(std::chrono::milliseconds idle_limit = std::chrono::milliseconds(0));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringd::ps
