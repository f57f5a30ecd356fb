#include "launcher/exec_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <system_error>

#include "common/logging.h"
#include "launcher/child_process.h"
#include "launcher/exec_allow_list.h"
#include "launcher/exec_command_line.h"
#include "launcher/exec_protocol.h"
#include "ringd/error.h"

namespace ringd::launcher {
namespace {

using exec::MessageType;

constexpr size_t kReadChunk = 64 << 10;
constexpr size_t kMaxPendingStdin = 1 << 20;
// How long one frame may take to arrive once its first byte did.
constexpr std::chrono::seconds kFrameTimeout{30};

net::Deadline after(std::chrono::milliseconds duration) { return net::Clock::now() + duration; }

// How long accepting pauses when accept() finds no file descriptor free (EMFILE, ENFILE).
constexpr std::chrono::milliseconds kAcceptPause{100};
// At most one line per this interval about connections dropped quietly in their handshake.
constexpr std::chrono::seconds kQuietLogInterval{10};

// The child's environment: the agent's own, then the command's assignments (already checked by
// check_environment) in order.
std::vector<std::string> child_environment(const ExecCommand& command) {
  std::vector<std::string> environment = current_environment();
  for (const auto& [name, value] : command.assignments) {
    const std::string prefix = name + "=";
    for (auto it = environment.begin(); it != environment.end();) {
      it = it->compare(0, prefix.size(), prefix) == 0 ? environment.erase(it) : it + 1;
    }
    environment.push_back(prefix + value);
  }
  return environment;
}

void start_detached(std::function<void()> body) { std::thread(std::move(body)).detach(); }

int remaining_ms(net::Deadline until) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - net::Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

int sooner(int a_ms, int b_ms) {
  if (a_ms < 0) return b_ms;
  if (b_ms < 0) return a_ms;
  return std::min(a_ms, b_ms);
}

// Moves one chunk from a child's pipe to the caller; false at the pipe's end.
bool forward_output(ChildProcess* child, int fd, MessageType type, exec::Channel* channel) {
  char buffer[kReadChunk];
  const ssize_t got = ::read(fd, buffer, sizeof(buffer));
  if (got > 0) {
    channel->send(type, std::string_view(buffer, static_cast<size_t>(got)), after(kFrameTimeout));
    return true;
  }
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (type == MessageType::kStdout) {
    child->close_stdout();
  } else {
    child->close_stderr();
  }
  return false;
}

}  // namespace

ExecServer::ExecServer(ExecServerOptions options, job::EnvLookup env)
    : options_(std::move(options)), env_(std::move(env)) {
  if (options_.secret.empty()) {
    RINGD_THROW(kInvalidArgument,
                "ringd agent: no job secret: set RINGD_JOB_SECRET or RINGD_JOB_SECRET_FILE (the "
                "exec service runs commands and never serves without authentication)");
  }
  if (options_.allowed.empty()) options_.allowed = default_allowed_programs();
  if (!options_.start_thread) options_.start_thread = start_detached;
  search_path_ = options_.search_path;
  if (search_path_.empty()) {
    const char* path = env_("PATH");
    search_path_ = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  }
  // A caller that vanishes while we write to it must not kill the agent.
  ::signal(SIGPIPE, SIG_IGN);
  listener_ = net::listen_on(options_.bind_host, options_.port, {});
  port_ = net::local_port(listener_.get());
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) RINGD_THROW(kIo, "pipe2: " << std::strerror(errno));
  stop_read_.reset(fds[0]);
  stop_write_.reset(fds[1]);
  acceptor_ = std::thread([this] { accept_loop(); });
}

ExecServer::~ExecServer() { stop(); }

void ExecServer::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  // The byte is never read: the pipe stays readable, waking every poller now and later.
  const char byte = 1;
  ssize_t ignored = ::write(stop_write_.get(), &byte, 1);
  (void)ignored;
  if (acceptor_.joinable()) acceptor_.join();
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return active_connections_ == 0; });
}

void ExecServer::accept_loop() {
  HandshakeLimits limits;
  limits.max_total = options_.max_handshakes;
  limits.max_per_source = options_.max_handshakes_per_source;
  limits.timeout = options_.handshake_timeout;
  PendingHandshakes pending(options_.secret, limits);
  net::Deadline accept_paused_until{};
  while (true) {
    const bool paused = net::Clock::now() < accept_paused_until;
    std::vector<pollfd> fds = {{stop_read_.get(), POLLIN, 0},
                               {paused ? -1 : listener_.get(), POLLIN, 0}};
    pending.append_pollfds(&fds);
    int timeout_ms = pending.timeout_ms();
    if (paused) timeout_ms = sooner(timeout_ms, remaining_ms(accept_paused_until));
    if (quiet_unlogged_ > 0) {
      timeout_ms = sooner(timeout_ms, remaining_ms(quiet_logged_at_ + kQuietLogInterval));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      RINGD_LOG(kError) << "exec service " << options_.name << ": poll: " << std::strerror(errno)
                        << "; no longer accepting";
      return;
    }
    if (fds[0].revents) return;
    std::vector<Authenticated> done;
    std::vector<DroppedHandshake> dropped;
    pending.advance(fds.data() + 2, &done, &dropped);
    if ((fds[1].revents & POLLIN) && !accept_ready(&pending, &dropped)) {
      accept_paused_until = net::Clock::now() + kAcceptPause;
    }
    report(dropped);
    for (Authenticated& connection : done) start_command(std::move(connection), &pending);
  }
}

bool ExecServer::accept_ready(PendingHandshakes* pending, std::vector<DroppedHandshake>* dropped) {
  // A bounded batch, so that handshakes in progress keep moving during a flood.
  for (int i = 0; i < 64; ++i) {
    net::Fd connection(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!connection.valid()) {
      const int error = errno;
      if (error == EAGAIN || error == EWOULDBLOCK || error == EINTR || error == ECONNABORTED) {
        return true;
      }
      ++stats_.accept_failures;
      if (!accept_failing_) {
        rlimit files{};
        ::getrlimit(RLIMIT_NOFILE, &files);
        RINGD_LOG(kWarn) << "exec service " << options_.name
                         << ": cannot accept connections: " << std::strerror(error)
                         << " (open-file limit " << files.rlim_cur << "; " << pending->size()
                         << " connection(s) in their handshake); pausing accepts for "
                         << kAcceptPause.count() << " ms at a time until one succeeds";
      }
      accept_failing_ = true;
      return false;
    }
    if (accept_failing_) {
      RINGD_LOG(kInfo) << "exec service " << options_.name << ": accepting connections again ("
                       << stats_.accept_failures.load() << " failed accept(s) so far)";
      accept_failing_ = false;
    }
    net::set_nodelay(connection.get());
    ++stats_.connections;
    pending->add(std::move(connection), dropped);
  }
  return true;
}

void ExecServer::report(const std::vector<DroppedHandshake>& dropped) {
  for (const DroppedHandshake& drop : dropped) {
    if (!drop.quiet) {
      if (drop.auth_failure) ++stats_.auth_failures;
      RINGD_LOG(kWarn) << "exec service " << options_.name << ": rejected " << drop.caller << ": "
                       << drop.reason;
      continue;
    }
    ++stats_.handshakes_dropped;
    if (net::Clock::now() < quiet_logged_at_ + kQuietLogInterval) {
      ++quiet_unlogged_;
      continue;
    }
    quiet_logged_at_ = net::Clock::now();
    RINGD_LOG(kWarn) << "exec service " << options_.name << ": dropped " << drop.caller << ": "
                     << drop.reason;
  }
  if (quiet_unlogged_ > 0 && net::Clock::now() >= quiet_logged_at_ + kQuietLogInterval) {
    RINGD_LOG(kWarn) << "exec service " << options_.name << ": dropped " << quiet_unlogged_
                     << " more connection(s) in their handshake in the last "
                     << kQuietLogInterval.count() << " s (silent, slow, closed or pushed out)";
    quiet_unlogged_ = 0;
    quiet_logged_at_ = net::Clock::now();
  }
}

void ExecServer::start_command(Authenticated connection, PendingHandshakes* pending) {
  bool at_cap;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    at_cap = active_connections_ >= options_.max_commands;
    if (!at_cap) ++active_connections_;
  }
  std::string refusal;
  if (at_cap) {
    refusal = "the agent " + options_.name + " already serves " +
              std::to_string(options_.max_commands) +
              " exec connections, its limit: try again once some have ended";
  } else {
    auto shared = std::make_shared<Authenticated>(std::move(connection));
    try {
      options_.start_thread([this, shared] {
        try {
          serve(std::move(*shared));
        } catch (const std::exception& error) {
          RINGD_LOG(kError) << "exec service: " << error.what();
        }
        std::lock_guard<std::mutex> lock(mutex_);
        --active_connections_;
        idle_.notify_all();
      });
      return;
    } catch (const std::system_error& error) {
      connection = std::move(*shared);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        --active_connections_;
      }
      refusal = "the agent " + options_.name + " cannot start a thread for the command (" +
                error.what() + "): its process or thread limit (a pod's pids limit) is reached";
    }
  }
  ++stats_.refused;
  RINGD_LOG(kWarn) << "exec service " << options_.name << ": refused " << connection.caller << ": "
                   << refusal;
  pending->refuse(std::move(connection), refusal);
}

void ExecServer::serve(Authenticated authenticated) {
  const net::Fd connection = std::move(authenticated.fd);
  const std::string& caller = authenticated.caller;
  exec::Channel channel(connection.get(), authenticated.keys, caller);
  MessageType type;
  std::string payload;
  try {
    if (!channel.receive(&type, &payload, authenticated.deadline)) return;
  } catch (const Error& error) {
    if (error.code() == ErrorCode::kAuth) ++stats_.auth_failures;
    RINGD_LOG(kWarn) << "exec service " << options_.name << ": " << error.what();
    return;
  }
  if (type == MessageType::kPing) {
    channel.send(MessageType::kPong, options_.name, after(options_.handshake_timeout));
    return;
  }
  if (type != MessageType::kRun) {
    ++stats_.refused;
    channel.send(MessageType::kRefused, "the first message must be a command",
                 after(options_.handshake_timeout));
    return;
  }

  std::unique_ptr<ChildProcess> child;
  try {
    const ExecCommand command = parse_exec_command_line(payload, env_);
    const ProgramChoice program = choose_program(command.argv[0], options_.allowed, search_path_);
    if (!program.refusal.empty()) RINGD_THROW(kInvalidArgument, program.refusal);
    const std::string refusal = check_environment(command);
    if (!refusal.empty()) RINGD_THROW(kInvalidArgument, refusal);
    SpawnOptions spawn;
    spawn.argv = command.argv;
    spawn.argv[0] = program.path;  // the allowed file itself, never the caller's path
    spawn.environment = child_environment(command);
    child = ChildProcess::spawn(spawn);
  } catch (const std::exception& error) {  // ringd::Error, or std::system_error (no thread)
    ++stats_.refused;
    RINGD_LOG(kWarn) << "exec service " << options_.name << ": refused " << caller << ": "
                     << error.what();
    channel.send(MessageType::kRefused, error.what(), after(options_.handshake_timeout));
    return;
  }
  ++stats_.started;
  ++stats_.running;
  RINGD_LOG(kInfo) << "exec service " << options_.name << ": " << caller << " started pid "
                   << child->pid() << ": " << payload;

  std::string pending_stdin;
  bool stdin_eof = false;
  std::string end_reason;  // non-empty: the caller is gone or misbehaved; kill the child
  bool stopping = false;   // stop() was called: the child gets stop_grace
  try {
    channel.send(MessageType::kStarted, std::to_string(child->pid()), after(kFrameTimeout));
    while (!child->exited() || child->stdout_fd() >= 0 || child->stderr_fd() >= 0) {
      std::vector<pollfd> fds;
      fds.push_back({stop_read_.get(), POLLIN, 0});
      fds.push_back({child->exited() ? -1 : child->exit_fd(), POLLIN, 0});
      const bool read_caller = pending_stdin.size() < kMaxPendingStdin;
      fds.push_back({connection.get(), static_cast<short>(read_caller ? POLLIN : 0), 0});
      fds.push_back({child->stdout_fd(), POLLIN, 0});
      fds.push_back({child->stderr_fd(), POLLIN, 0});
      const bool write_stdin = !pending_stdin.empty() && child->stdin_fd() >= 0;
      fds.push_back({write_stdin ? child->stdin_fd() : -1, POLLOUT, 0});
      // Once the child has ended, its pipes get a moment to drain (a grandchild holding them
      // open must not keep the caller waiting forever).
      const int timeout_ms = child->exited() ? 200 : -1;
      const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
      if (ready < 0 && errno != EINTR) RINGD_THROW(kIo, "poll: " << std::strerror(errno));
      if (ready == 0) break;
      if (fds[0].revents) {
        end_reason = "the agent is stopping";
        stopping = true;
        break;
      }
      if (fds[2].revents) {
        if (!channel.receive(&type, &payload, after(kFrameTimeout))) {
          end_reason = "the caller disconnected";
          break;
        }
        if (type == MessageType::kStdin && !stdin_eof) {
          pending_stdin += payload;
        } else if (type == MessageType::kStdinEof) {
          stdin_eof = true;
        } else {
          RINGD_THROW(kProtocol, "unexpected exec message type " << static_cast<int>(type)
                                                                 << " from " << caller);
        }
      }
      if (fds[3].revents)
        forward_output(child.get(), child->stdout_fd(), MessageType::kStdout, &channel);
      if (fds[4].revents)
        forward_output(child.get(), child->stderr_fd(), MessageType::kStderr, &channel);
      if (fds[5].revents) {
        const ssize_t wrote =
            ::write(child->stdin_fd(), pending_stdin.data(), pending_stdin.size());
        if (wrote > 0) {
          pending_stdin.erase(0, static_cast<size_t>(wrote));
        } else if (wrote < 0 && errno != EAGAIN && errno != EINTR) {
          pending_stdin.clear();  // the child closed its stdin: drop what it will never read
          child->close_stdin();
        }
      }
      if (stdin_eof && pending_stdin.empty() && child->stdin_fd() >= 0) child->close_stdin();
    }
  } catch (const Error& error) {
    if (error.code() == ErrorCode::kAuth) ++stats_.auth_failures;
    end_reason = error.what();
  }
  if (!end_reason.empty() && !child->exited()) {
    ++stats_.killed;
    const std::chrono::milliseconds grace = stopping ? options_.stop_grace : options_.kill_grace;
    RINGD_LOG(kWarn) << "exec service " << options_.name << ": killing pid " << child->pid()
                     << "'s process group (SIGTERM, SIGKILL after " << grace.count()
                     << " ms): " << end_reason;
    child->terminate(grace);
    --stats_.running;
    return;
  }
  child->wait_for_exit(std::chrono::milliseconds(-1));
  --stats_.running;
  RINGD_LOG(kInfo) << "exec service " << options_.name << ": pid " << child->pid() << " ended ("
                   << child->describe_status() << ")";
  if (end_reason.empty()) {
    try {
      channel.send(MessageType::kExit, child->describe_status(), after(kFrameTimeout));
    } catch (const Error&) {
      // The caller left just as the child ended: nothing to tell.
    }
  }
}

}  // namespace ringd::launcher
