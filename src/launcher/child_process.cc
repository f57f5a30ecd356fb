#include "launcher/child_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "ringd/error.h"

extern char** environ;

namespace ringd::launcher {
namespace {

// How long terminate() lets a session leader exit by itself once its other members have ended.
constexpr std::chrono::milliseconds kLeaderOwnExit(1000);

// The pids that ChildProcess reaper threads wait for. spawn() holds the mutex from fork() until the
// new pid is in the set, and a reaper thread removes its pid only after waitpid() returned it;
// reap_orphans() looks a zombie up and reaps it under the same mutex. So it never takes a tracked
// child's exit status, not even that of a child which died before spawn() returned.
struct TrackedChildren {
  std::mutex mutex;
  std::unordered_multiset<pid_t> pids;  // guarded by mutex
};

TrackedChildren& tracked_children() {
  static TrackedChildren* const tracked = new TrackedChildren();  // outlives detached threads
  return *tracked;
}

struct ProcessState {
  pid_t pid;
  char state;  // 'Z': a zombie, ended and waiting to be reaped
  pid_t ppid;
  pid_t session;
};

// The processes of /proc/<pid>/stat ("pid (comm) state ppid pgrp session ...") for which `keep`
// holds. Linux has no call that lists a process's children or a session's members.
template <typename Keep>
std::vector<ProcessState> processes_in_proc(Keep keep) {
  std::vector<ProcessState> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (const dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // it ended meanwhile
    char stat[512];
    const ssize_t got = ::read(fd, stat, sizeof(stat) - 1);
    ::close(fd);
    if (got <= 0) continue;
    stat[got] = '\0';
    // The command name may hold spaces and parentheses: the fields resume after the last ')'.
    const char* name_end = std::strrchr(stat, ')');
    char state = 0;
    int ppid = 0;
    int group = 0;
    int session = 0;
    if (name_end == nullptr ||
        std::sscanf(name_end + 1, " %c %d %d %d", &state, &ppid, &group, &session) != 4) {
      continue;
    }
    const ProcessState process{static_cast<pid_t>(pid), state, ppid, session};
    if (keep(process)) found.push_back(process);
  }
  ::closedir(proc);
  return found;
}

// This process's children, tracked or not. waitid(P_ALL, WNOHANG | WNOWAIT) would show one
// zombie, any one, so a tracked zombie would hide untracked ones behind it.
std::vector<ProcessState> children_in_proc() {
  const pid_t self = ::getpid();
  return processes_in_proc([self](const ProcessState& p) { return p.ppid == self; });
}

// The live members of session `session` but `except`: a new-session child and everything it
// started, also those it moved into process groups of their own (Open MPI's orted puts each rank
// in one).
std::vector<ProcessState> session_members(pid_t session, pid_t except) {
  return processes_in_proc([session, except](const ProcessState& p) {
    return p.session == session && p.pid != except && p.state != 'Z';
  });
}

// Sends `signal_number` to every live member of the session; returns how many there were.
size_t signal_session(pid_t session, int signal_number, pid_t except = 0) {
  const std::vector<ProcessState> members = session_members(session, except);
  for (const ProcessState& member : members) ::kill(member.pid, signal_number);
  return members.size();
}

void make_pipe(net::Fd* read_end, net::Fd* write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) RINGD_THROW(kIo, "pipe2: " << std::strerror(errno));
  read_end->reset(fds[0]);
  write_end->reset(fds[1]);
}

// Between fork and exec: only async-signal-safe calls. Reports errno through `error_fd` and exits.
[[noreturn]] void exec_child(const SpawnOptions& options, const char* program, char* const* argv,
                             char* const* envp, int stdin_fd, int stdout_fd, int stderr_fd,
                             int error_fd, pid_t parent) {
  if (options.new_session) ::setsid();
  if (options.die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
  }
  if (stdin_fd >= 0) {
    ::dup2(stdin_fd, 0);
    ::dup2(stdout_fd, 1);
    ::dup2(stderr_fd, 2);
  }
  // Undo what the agent changed for itself: ignored signals (SIGPIPE) and blocked ones survive
  // exec.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) ::sigaction(s, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(program, argv, envp);
  const int error = errno;
  ssize_t ignored = ::write(error_fd, &error, sizeof(error));
  (void)ignored;
  ::_exit(127);
}

}  // namespace

std::string find_program(const std::string& name, const std::string& path) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return name;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string directory = end == start ? "." : path.substr(start, end - start);
    const std::string candidate = directory + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

std::vector<std::string> current_environment() {
  std::vector<std::string> out;
  for (char** entry = environ; entry && *entry; ++entry) out.emplace_back(*entry);
  return out;
}

std::unique_ptr<ChildProcess> ChildProcess::spawn(const SpawnOptions& options) {
  RINGD_CHECK_ARG(!options.argv.empty(), "spawn: no program given");
  const std::string program = find_program(options.argv[0], options.path);
  if (program.empty()) {
    RINGD_THROW(kInvalidArgument,
                "cannot run " << options.argv[0] << ": not found in PATH=" << options.path);
  }
  std::vector<char*> argv;
  for (const std::string& word : options.argv) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& entry : options.environment)
    envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);

  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->group_ = options.new_session;
  net::Fd child_stdin, child_stdout, child_stderr;
  if (options.pipe_stdio) {
    make_pipe(&child_stdin, &child->stdin_);
    make_pipe(&child->stdout_, &child_stdout);
    make_pipe(&child->stderr_, &child_stderr);
  }
  net::Fd error_read, error_write;
  make_pipe(&error_read, &error_write);
  make_pipe(&child->exit_read_, &child->exit_write_);

  const pid_t parent = ::getpid();
  pid_t pid;
  {
    // Registered before anyone can look: see TrackedChildren.
    TrackedChildren& tracked = tracked_children();
    std::lock_guard<std::mutex> lock(tracked.mutex);
    pid = ::fork();
    if (pid == 0) {
      exec_child(options, program.c_str(), argv.data(), envp.data(), child_stdin.get(),
                 child_stdout.get(), child_stderr.get(), error_write.get(), parent);
    }
    if (pid > 0) tracked.pids.insert(pid);
  }
  if (pid < 0) RINGD_THROW(kIo, "fork for " << program << ": " << std::strerror(errno));
  child->pid_ = pid;
  error_write.reset();
  child_stdin.reset();
  child_stdout.reset();
  child_stderr.reset();
  for (int fd : {child->stdin_.get(), child->stdout_.get(), child->stderr_.get()}) {
    if (fd >= 0) net::set_nonblocking(fd);
  }
  // The reaper starts before we look at exec's outcome, so a failed exec is reaped too.
  ChildProcess* raw = child.get();
  child->reaper_ = std::thread([raw] {
    int status = 0;
    while (::waitpid(raw->pid_, &status, 0) < 0 && errno == EINTR) {
    }
    {
      TrackedChildren& tracked = tracked_children();
      std::lock_guard<std::mutex> lock(tracked.mutex);
      const auto entry = tracked.pids.find(raw->pid_);
      if (entry != tracked.pids.end()) tracked.pids.erase(entry);
    }
    raw->status_.store(status);
    raw->exited_.store(true);
    const char byte = 1;
    ssize_t ignored = ::write(raw->exit_write_.get(), &byte, 1);
    (void)ignored;
  });
  int exec_error = 0;
  ssize_t got;
  while ((got = ::read(error_read.get(), &exec_error, sizeof(exec_error))) < 0 && errno == EINTR) {
  }
  if (got == sizeof(exec_error)) {
    child->wait_for_exit(std::chrono::milliseconds(-1));
    RINGD_THROW(kInvalidArgument, "cannot run " << program << ": " << std::strerror(exec_error));
  }
  return child;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exited_.load()) {
    signal(SIGKILL);
  }
  if (reaper_.joinable()) reaper_.join();
}

std::string describe_wait_status(int wait_status) {
  if (WIFSIGNALED(wait_status)) return "signal " + std::to_string(WTERMSIG(wait_status));
  return "exit " + std::to_string(WEXITSTATUS(wait_status));
}

bool become_child_subreaper() { return ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0; }

std::vector<ReapedOrphan> reap_orphans() {
  std::vector<ReapedOrphan> reaped;
  // Without a zombie child of any kind there is nothing to look for (the common case, one call).
  siginfo_t info{};
  if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) {
    return reaped;
  }
  TrackedChildren& tracked = tracked_children();
  for (const ProcessState& child : children_in_proc()) {
    if (child.state != 'Z') continue;
    std::lock_guard<std::mutex> lock(tracked.mutex);
    if (tracked.pids.count(child.pid) != 0) continue;  // its reaper thread's
    int status = 0;
    if (::waitpid(child.pid, &status, WNOHANG) == child.pid) reaped.push_back({child.pid, status});
  }
  return reaped;
}

std::vector<pid_t> running_orphans() {
  std::vector<pid_t> running;
  TrackedChildren& tracked = tracked_children();
  for (const ProcessState& child : children_in_proc()) {
    if (child.state == 'Z') continue;
    std::lock_guard<std::mutex> lock(tracked.mutex);
    if (tracked.pids.count(child.pid) == 0) running.push_back(child.pid);
  }
  return running;
}

std::string ChildProcess::describe_status() const { return describe_wait_status(status_.load()); }

int ChildProcess::exit_code() const {
  const int status = status_.load();
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

void ChildProcess::signal(int signal_number) {
  if (pid_ <= 0 || exited_.load()) return;
  // A group that is already gone (ESRCH) is fine: there is nothing left to signal.
  if (group_) {
    ::kill(-pid_, signal_number);
    signal_session(pid_, signal_number);
  }
  ::kill(pid_, signal_number);
}

void ChildProcess::signal_leader(int signal_number) {
  if (pid_ > 0 && !exited_.load()) ::kill(pid_, signal_number);
}

bool ChildProcess::wait_for_exit(std::chrono::milliseconds timeout) {
  pollfd entry{exit_read_.get(), POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!exited_.load()) {
    int wait_ms = -1;
    if (timeout.count() >= 0) {
      wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     deadline - std::chrono::steady_clock::now())
                                     .count());
      if (wait_ms <= 0) return exited_.load();
    }
    ::poll(&entry, 1, wait_ms);
  }
  return true;
}

void ChildProcess::terminate(std::chrono::milliseconds grace) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + grace;
  const auto left = [&deadline] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  if (group_ && pid_ > 0 && !exited_.load() && signal_session(pid_, SIGTERM, pid_) > 0) {
    // The session's other members first, for up to half the grace: a daemon's workers (orted's
    // ranks) then end while their daemon still serves them. An orted that got SIGTERM at the same
    // time would exit at once and leave its ranks hanging in MPI_Finalize until killed.
    // Once they are gone the leader gets a moment to notice and exit on its own (a shell's
    // `wait` returning, orted seeing its ranks end) before it is signalled too.
    Clock::time_point leader_signal_at = Clock::now() + grace / 2;
    bool members_gone = false;
    while (!exited_.load() && Clock::now() < leader_signal_at) {
      if (!members_gone && session_members(pid_, pid_).empty()) {
        members_gone = true;
        leader_signal_at = std::min(leader_signal_at, Clock::now() + kLeaderOwnExit);
      }
      wait_for_exit(std::chrono::milliseconds(50));  // returns at once when the leader exits
    }
  }
  signal(SIGTERM);
  if (!wait_for_exit(left())) {
    signal(SIGKILL);
    wait_for_exit(std::chrono::milliseconds(-1));
  }
  // A session leader that ended on SIGTERM may leave members that ignored it or took longer.
  if (group_) {
    ::kill(-pid_, SIGKILL);
    signal_session(pid_, SIGKILL);
  }
}

}  // namespace ringd::launcher
