#include "launcher/exec_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "launcher/exec_protocol.h"
#include "ringd/error.h"

namespace ringd::launcher {
namespace {

using exec::MessageType;

constexpr std::chrono::seconds kFrameTimeout{30};

net::Deadline after(std::chrono::milliseconds duration) { return net::Clock::now() + duration; }

std::string agent_name(const std::string& host, uint16_t port) {
  return "agent " + host + ":" + std::to_string(port);
}

// Connects and authenticates; throws naming the agent.
net::Fd connect_agent(const std::string& host, uint16_t port, const std::string& secret,
                      std::chrono::milliseconds timeout, exec::SessionKeys* keys) {
  const std::string peer = agent_name(host, port);
  if (secret.empty()) {
    RINGD_THROW(kInvalidArgument, "no job secret to authenticate to "
                                      << peer << ": set RINGD_JOB_SECRET or RINGD_JOB_SECRET_FILE");
  }
  if (!host_resolves(host)) {
    // A name without a dot is what Open MPI makes of a hostfile's FQDN unless it is told to keep
    // it (ringd launch does): a pod's short name resolves only inside that pod.
    if (host.find('.') == std::string::npos) {
      RINGD_THROW(kIo, host << " does not resolve: a short name; in Kubernetes a peer pod resolves "
                               "as <pod>.<service>.<namespace>.svc.<domain> (running mpirun "
                               "yourself, give it --mca orte_keep_fqdn_hostnames 1)");
    }
    RINGD_THROW(kIo, host << " does not resolve (a pod's DNS name appears once its pod exists; "
                             "the headless Service needs publishNotReadyAddresses: true)");
  }
  const net::Deadline deadline = after(timeout);
  int error = 0;
  net::Fd fd = net::connect_to(net::Endpoint{host, port}, {}, deadline, &error);
  if (!fd.valid()) {
    if (error == ETIMEDOUT) RINGD_THROW(kTimeout, "connecting to " << peer << ": timed out");
    RINGD_THROW(kIo, "connecting to " << peer << ": " << net::errno_text(error)
                                      << " (is `ringd agent` running there?)");
  }
  net::set_nodelay(fd.get());
  *keys = exec::client_handshake(fd.get(), secret, peer, deadline);
  return fd;
}

void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t wrote = ::write(fd, data.data() + done, data.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return;  // our own stdout is gone: nothing better to do than drop it
    done += static_cast<size_t>(wrote);
  }
}

int parse_exit(const std::string& text) {
  if (text.rfind("exit ", 0) == 0) return std::atoi(text.c_str() + 5);
  if (text.rfind("signal ", 0) == 0) return 128 + std::atoi(text.c_str() + 7);
  return 255;
}

}  // namespace

bool host_resolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const bool ok = ::getaddrinfo(host.c_str(), nullptr, &hints, &result) == 0 && result;
  if (result) ::freeaddrinfo(result);
  return ok;
}

std::string ping_agent(const std::string& host, uint16_t port, const std::string& secret,
                       std::chrono::milliseconds timeout, std::string* name) {
  try {
    exec::SessionKeys keys;
    net::Fd fd = connect_agent(host, port, secret, timeout, &keys);
    exec::Channel channel(fd.get(), keys, agent_name(host, port));
    channel.send(MessageType::kPing, "", after(timeout));
    MessageType type;
    std::string payload;
    if (!channel.receive(&type, &payload, after(timeout)) || type != MessageType::kPong) {
      return "did not answer the ping";
    }
    if (name) *name = payload;
    return "";
  } catch (const Error& error) {
    return error.what();
  }
}

int run_remote_command(const RemoteCommand& command) {
  exec::SessionKeys keys;
  net::Fd fd =
      connect_agent(command.host, command.port, command.secret, command.connect_timeout, &keys);
  const std::string peer = agent_name(command.host, command.port);
  exec::Channel channel(fd.get(), keys, peer);
  channel.send(MessageType::kRun, command.command_line, after(kFrameTimeout));
  MessageType type;
  std::string payload;
  if (!channel.receive(&type, &payload, after(kFrameTimeout))) {
    RINGD_THROW(kPeerLost, peer << " closed the connection before starting the command");
  }
  if (type == MessageType::kRefused) {
    RINGD_THROW(kInvalidArgument, peer << " refused to run the command: " << payload);
  }
  if (type != MessageType::kStarted) {
    RINGD_THROW(kProtocol,
                peer << " answered a command with message type " << static_cast<int>(type));
  }

  int stdin_fd = command.stdin_fd;
  if (stdin_fd < 0) channel.send(MessageType::kStdinEof, "", after(kFrameTimeout));
  char buffer[64 << 10];
  while (true) {
    pollfd fds[2] = {{fd.get(), POLLIN, 0}, {stdin_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      RINGD_THROW(kIo, "poll: " << std::strerror(errno));
    }
    if (fds[1].revents) {
      const ssize_t got = ::read(stdin_fd, buffer, sizeof(buffer));
      if (got > 0) {
        channel.send(MessageType::kStdin, std::string_view(buffer, static_cast<size_t>(got)),
                     after(kFrameTimeout));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        channel.send(MessageType::kStdinEof, "", after(kFrameTimeout));
        stdin_fd = -1;
      }
    }
    if (!fds[0].revents) continue;
    if (!channel.receive(&type, &payload, after(kFrameTimeout))) {
      RINGD_THROW(kPeerLost, "lost the connection to "
                                 << peer
                                 << " while the command ran: the agent died or the pod "
                                    "restarted");
    }
    switch (type) {
      case MessageType::kStdout: write_all(command.stdout_fd, payload); break;
      case MessageType::kStderr: write_all(command.stderr_fd, payload); break;
      case MessageType::kExit: return parse_exit(payload);
      default:
        RINGD_THROW(kProtocol, peer << " sent unexpected message type " << static_cast<int>(type));
    }
  }
}

}  // namespace ringd::launcher
