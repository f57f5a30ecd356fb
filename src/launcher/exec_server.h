// The agent's exec service: accepts `ringd exec` connections, authenticates them (exec_protocol.h),
// and runs the one allowed command each asks for (exec_command_line.h) as a child in its own
// process group, forwarding stdin, stdout, stderr and the exit status. One thread per connection
// (mpirun opens one per remote pod), each sleeping in poll() on the socket, the child's pipes, a
// reaper's pipe and the server's stop pipe: nothing spins.
//
// A child never outlives its caller: when the connection closes, fails or carries a forged or
// replayed frame, the whole process group gets SIGTERM, then SIGKILL after `kill_grace`. Should the
// agent itself die, the child gets SIGKILL from the kernel (PR_SET_PDEATHSIG), as in a real pod
// where the container's death takes its processes with it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "launcher/topology.h"
#include "transport/tcp/socket.h"

namespace ringd::launcher {

struct ExecServerOptions {
  std::string bind_host = "0.0.0.0";
  uint16_t port = 29400;             // 0 = any free port (tests)
  std::string secret;                // required: the agent refuses to serve unauthenticated
  std::vector<std::string> allowed;  // program base names; empty = default_allowed_programs()
  std::string name;                  // this agent's name in pongs and logs (its pod)
  std::chrono::milliseconds handshake_timeout{5000};
  std::chrono::milliseconds kill_grace{2000};
};

struct ExecServerStats {
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> auth_failures{0};  // wrong secret, forged or replayed frames
  std::atomic<uint64_t> refused{0};        // commands not allowed or not startable
  std::atomic<uint64_t> started{0};
  std::atomic<uint64_t> killed{0};  // children killed because their caller went away
  std::atomic<int64_t> running{0};
};

class ExecServer {
 public:
  // Listens at once; throws ringd::Error (kInvalidArgument without a secret, kIo when the port is
  // taken).
  explicit ExecServer(ExecServerOptions options, EnvLookup env = process_environment());
  ~ExecServer();
  ExecServer(const ExecServer&) = delete;
  ExecServer& operator=(const ExecServer&) = delete;

  uint16_t port() const { return port_; }
  const ExecServerStats& stats() const { return stats_; }
  // Stops accepting, kills every running child, waits for the connection threads.
  void stop();

 private:
  void accept_loop();
  void serve(tcp::Fd connection);

  ExecServerOptions options_;
  EnvLookup env_;
  tcp::Fd listener_;
  uint16_t port_ = 0;
  tcp::Fd stop_read_;
  tcp::Fd stop_write_;
  ExecServerStats stats_;
  std::thread acceptor_;
  std::mutex mutex_;
  std::condition_variable idle_;
  int active_connections_ = 0;  // guarded by mutex_
  bool stopped_ = false;        // guarded by mutex_
};

}  // namespace ringd::launcher
