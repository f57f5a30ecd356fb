// The agent's exec service: accepts `ringd exec` connections, authenticates them (exec_protocol.h),
// and runs the one allowed command each asks for (exec_command_line.h, exec_allow_list.h) as a
// child in its own process group, forwarding stdin, stdout, stderr and the exit status.
//
// Threads and bounds (a flood of connections must not take the agent, PID 1 of its pod, down):
//   - the acceptor thread accepts and carries every unauthenticated connection through the
//     handshake itself, without blocking (exec_handshakes.h): at most max_handshakes of them,
//     max_handshakes_per_source per address, each dropped handshake_timeout after it connected;
//   - a caller that proved the secret gets a thread of its own (mpirun opens one connection per
//     remote pod), sleeping in poll() on the socket, the child's pipes, a reaper's pipe and the
//     stop pipe; at most max_commands at once, beyond that (or when no thread can be created, e.g.
//     under a pids limit) the caller is told why and the service goes on;
//   - accept() failing for want of file descriptors (EMFILE, ENFILE) pauses accepting for
//     kAcceptPause and logs once per episode, instead of spinning on a listener that stays ready.
//
// A child never outlives its caller: when the connection closes, fails or carries a forged or
// replayed frame, the whole process group gets SIGTERM, then SIGKILL after `kill_grace`; stop()
// does the same with `stop_grace` (the agent stopping on SIGTERM gives the job time to end in
// order). Should the agent itself die, the child gets SIGKILL from the kernel (PR_SET_PDEATHSIG),
// as in a real pod where the container's death takes its processes with it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "job/topology.h"
#include "launcher/exec_handshakes.h"
#include "net/socket.h"

namespace ringd::launcher {

struct ExecServerOptions {
  std::string bind_host = "0.0.0.0";
  uint16_t port = 29400;  // 0 = any free port (tests)
  std::string secret;     // required: the agent refuses to serve unauthenticated
  // Base names (found on search_path) or absolute paths; empty = default_allowed_programs().
  std::vector<std::string> allowed;
  std::string search_path;  // where programs are found; "" = PATH at construction
  std::string name;         // this agent's name in pongs and logs (its pod)
  std::chrono::milliseconds handshake_timeout{5000};  // from accept to the first message
  size_t max_handshakes = 64;                         // unauthenticated connections, in all
  size_t max_handshakes_per_source = 8;               // ... from one address
  size_t max_commands = 256;                          // authenticated connections (a thread each)
  // Starts a detached thread; throws std::system_error as std::thread does (tests inject that).
  std::function<void(std::function<void()>)> start_thread;
  std::chrono::milliseconds kill_grace{2000};  // a child whose caller went away
  std::chrono::milliseconds stop_grace{2000};  // a child still running when stop() is called
};

struct ExecServerStats {
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> auth_failures{0};  // wrong secret, forged or replayed frames
  std::atomic<uint64_t> refused{0};        // commands not allowed or not startable
  std::atomic<uint64_t> started{0};
  std::atomic<uint64_t> killed{0};  // children killed because their caller went away
  std::atomic<int64_t> running{0};
  std::atomic<uint64_t> handshakes_dropped{0};  // silent, slow, closed or pushed out
  std::atomic<uint64_t> accept_failures{0};     // accept() failed (EMFILE, ENFILE, ...)
};

class ExecServer {
 public:
  // Listens at once; throws ringd::Error (kInvalidArgument without a secret, kIo when the port is
  // taken).
  explicit ExecServer(ExecServerOptions options, job::EnvLookup env = job::process_environment());
  ~ExecServer();
  ExecServer(const ExecServer&) = delete;
  ExecServer& operator=(const ExecServer&) = delete;

  uint16_t port() const { return port_; }
  const ExecServerStats& stats() const { return stats_; }
  // Stops accepting, ends every running child (SIGTERM to its group, SIGKILL after stop_grace),
  // waits for the connection threads.
  void stop();

 private:
  void accept_loop();
  // Accepts what the listener holds; false when accepting should pause (out of descriptors).
  bool accept_ready(PendingHandshakes* pending, std::vector<DroppedHandshake>* dropped);
  void report(const std::vector<DroppedHandshake>& dropped);
  void start_command(Authenticated connection, PendingHandshakes* pending);
  void serve(Authenticated connection);

  ExecServerOptions options_;
  job::EnvLookup env_;
  std::string search_path_;
  net::Fd listener_;
  uint16_t port_ = 0;
  net::Fd stop_read_;
  net::Fd stop_write_;
  ExecServerStats stats_;
  std::thread acceptor_;
  std::mutex mutex_;
  std::condition_variable idle_;
  size_t active_connections_ = 0;  // guarded by mutex_
  bool stopped_ = false;           // guarded by mutex_
  // Quiet handshake drops are logged one per kQuietLogInterval, the rest summed (acceptor only).
  net::Deadline quiet_logged_at_{};
  uint64_t quiet_unlogged_ = 0;
  bool accept_failing_ = false;  // acceptor only: accept() failed and has not succeeded since
};

}  // namespace ringd::launcher
