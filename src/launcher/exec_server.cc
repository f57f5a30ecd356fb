#include "launcher/exec_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/logging.h"
#include "launcher/child_process.h"
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

tcp::Deadline after(std::chrono::milliseconds duration) { return tcp::Clock::now() + duration; }

// The child's environment: the agent's own, then the command's assignments in order.
std::vector<std::string> child_environment(const ExecCommand& command, std::string* path) {
  std::vector<std::string> environment = current_environment();
  const char* agent_path = std::getenv("PATH");
  *path = agent_path ? agent_path : "/usr/local/bin:/usr/bin:/bin";
  for (const auto& [name, value] : command.assignments) {
    const std::string prefix = name + "=";
    for (auto it = environment.begin(); it != environment.end();) {
      it = it->compare(0, prefix.size(), prefix) == 0 ? environment.erase(it) : it + 1;
    }
    environment.push_back(prefix + value);
    if (name == "PATH") *path = value;
  }
  return environment;
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

ExecServer::ExecServer(ExecServerOptions options, EnvLookup env)
    : options_(std::move(options)), env_(std::move(env)) {
  if (options_.secret.empty()) {
    RINGD_THROW(kInvalidArgument,
                "ringd agent: no job secret: set RINGD_JOB_SECRET or RINGD_JOB_SECRET_FILE (the "
                "exec service runs commands and never serves without authentication)");
  }
  if (options_.allowed.empty()) options_.allowed = default_allowed_programs();
  // A caller that vanishes while we write to it must not kill the agent.
  ::signal(SIGPIPE, SIG_IGN);
  listener_ = tcp::listen_on(options_.bind_host, options_.port, 0);
  port_ = tcp::local_port(listener_.get());
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
  while (true) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {stop_read_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    tcp::Fd connection(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!connection.valid()) continue;
    tcp::set_nodelay(connection.get());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++active_connections_;
    }
    ++stats_.connections;
    // Detached: stop() waits for active_connections_ to reach zero instead of joining.
    std::thread([this, fd = connection.release()]() mutable {
      try {
        serve(tcp::Fd(fd));
      } catch (const std::exception& error) {
        RINGD_LOG(kError) << "exec service: " << error.what();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      --active_connections_;
      idle_.notify_all();
    }).detach();
  }
}

void ExecServer::serve(tcp::Fd connection) {
  const std::string caller = "exec caller " + tcp::remote_address(connection.get());
  exec::SessionKeys keys;
  try {
    keys = exec::server_handshake(connection.get(), options_.secret, caller,
                                  after(options_.handshake_timeout));
  } catch (const Error& error) {
    if (error.code() == ErrorCode::kAuth) ++stats_.auth_failures;
    RINGD_LOG(kWarn) << "exec service " << options_.name << ": rejected " << caller << ": "
                     << error.what();
    return;
  }
  exec::Channel channel(connection.get(), keys, caller);
  MessageType type;
  std::string payload;
  try {
    if (!channel.receive(&type, &payload, after(options_.handshake_timeout))) return;
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
    const std::string refusal = check_allowed(command, options_.allowed);
    if (!refusal.empty()) RINGD_THROW(kInvalidArgument, refusal);
    SpawnOptions spawn;
    spawn.argv = command.argv;
    spawn.environment = child_environment(command, &spawn.path);
    child = ChildProcess::spawn(spawn);
  } catch (const Error& error) {
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
    RINGD_LOG(kWarn) << "exec service " << options_.name << ": killing pid " << child->pid()
                     << "'s process group: " << end_reason;
    child->terminate(options_.kill_grace);
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
