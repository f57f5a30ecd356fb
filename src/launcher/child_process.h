// A child process for the agent (commands of `ringd exec`) and for `ringd launch` (mpirun):
// started with fork/execve from argument and environment vectors prepared beforehand (nothing but
// async-signal-safe calls between fork and exec), optionally in a new session (so that it and
// everything it starts can be signalled together, also what it moves into process groups of its
// own, as Open MPI's orted does with its ranks) and with SIGKILL on the death
// of the thread that started it. A reaper thread blocks in waitpid() and then makes exit_fd()
// readable, so callers wait for the child in the same poll() as for everything else.
//
// The agent is PID 1 of its pod and a child subreaper, so descendants orphaned by their parent's
// death become its children too: reap_orphans() reaps those and only those, never a child that a
// ChildProcess waits for (its reaper thread alone collects that exit status).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/socket.h"

namespace ringd::launcher {

struct SpawnOptions {
  std::vector<std::string> argv;         // argv[0]: a path, or a name searched in `path`
  std::vector<std::string> environment;  // "NAME=VALUE" each: the child's whole environment
  std::string path;                      // the PATH for finding argv[0] (the child's)
  bool pipe_stdio = true;                // false: the child shares this process's stdio
  bool new_session = true;               // setsid(): its own process group
  bool die_with_parent = true;           // PR_SET_PDEATHSIG SIGKILL
};

class ChildProcess {
 public:
  // Throws ringd::Error(kInvalidArgument) when the program is not found or cannot be executed
  // ("cannot run orted: No such file or directory"), kIo when fork or pipes fail.
  static std::unique_ptr<ChildProcess> spawn(const SpawnOptions& options);
  ~ChildProcess();  // a child still running is killed (SIGKILL to its group) and reaped

  pid_t pid() const { return pid_; }
  // Pipe ends (-1 without pipe_stdio, or once closed). Non-blocking.
  int stdin_fd() const { return stdin_.get(); }
  int stdout_fd() const { return stdout_.get(); }
  int stderr_fd() const { return stderr_.get(); }
  void close_stdin() { stdin_.reset(); }
  void close_stdout() { stdout_.reset(); }
  void close_stderr() { stderr_.reset(); }

  // Readable once the child has been reaped.
  int exit_fd() const { return exit_read_.get(); }
  bool exited() const { return exited_.load(); }
  int wait_status() const { return status_.load(); }  // meaningful once exited()
  // "exit N" or "signal N".
  std::string describe_status() const;
  // The exit code a shell would report: N, or 128 + signal.
  int exit_code() const;

  // Sends `signal` to the child's session, every process in it whatever its process group (or
  // the child alone without new_session).
  void signal(int signal_number);
  // Sends `signal` to the child alone (mpirun, which then ends its job in order).
  void signal_leader(int signal_number);
  // SIGTERM, up to `grace` for it to end, then SIGKILL; returns once reaped. In a new session the
  // other members get SIGTERM first and up to half the grace to end; once they have, the child
  // gets up to 1 s (within that half) to exit on its own before it is signalled too.
  void terminate(std::chrono::milliseconds grace);
  // Blocks until the child was reaped, or `timeout` passed (false).
  bool wait_for_exit(std::chrono::milliseconds timeout);

 private:
  ChildProcess() = default;

  pid_t pid_ = -1;
  bool group_ = false;
  net::Fd stdin_;
  net::Fd stdout_;
  net::Fd stderr_;
  net::Fd exit_read_;
  net::Fd exit_write_;
  std::atomic<bool> exited_{false};
  std::atomic<int> status_{0};
  std::thread reaper_;
};

// "exit N" or "signal N" for a status from waitpid().
std::string describe_wait_status(int wait_status);

// Marks this process a child subreaper (prctl PR_SET_CHILD_SUBREAPER): orphaned descendants are
// reparented to it instead of to PID 1, so it reaps them the same way whether it is PID 1 or not.
// False, with errno set, when the kernel refuses.
bool become_child_subreaper();

// Children of this process that no ChildProcess tracks: orphaned descendants reparented to it.
// Call these from one thread only: a pid they return stays this process's child (and cannot be
// reused) until that thread reaps it.
struct ReapedOrphan {
  pid_t pid = -1;
  int wait_status = 0;
};
// Reaps every untracked child that has ended and returns them; does not block.
std::vector<ReapedOrphan> reap_orphans();
// The untracked children still running (zombies excluded).
std::vector<pid_t> running_orphans();

// The executable `name` would run as: itself when it contains '/', else the first executable file
// of that name in the ':'-separated `path`; "" when none.
std::string find_program(const std::string& name, const std::string& path);

// This process's environment as "NAME=VALUE" strings.
std::vector<std::string> current_environment();

}  // namespace ringd::launcher
