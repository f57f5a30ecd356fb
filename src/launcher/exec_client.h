// The caller's side of the agent's exec service: `ringd exec HOST COMMAND...` (Open MPI's rsh
// agent) and the authenticated ping `ringd launch` uses to learn that a pod's agent is up.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "net/socket.h"

namespace ringd::launcher {

struct RemoteCommand {
  std::string host;  // a pod's DNS name or an address
  uint16_t port = 29400;
  std::string secret;
  std::string command_line;  // ssh style: the words joined with spaces
  std::chrono::milliseconds connect_timeout{10000};
  int stdin_fd = 0;  // -1: no stdin (sends end-of-file at once)
  int stdout_fd = 1;
  int stderr_fd = 2;
};

// Runs the command on the agent and returns its exit code (128 + N for signal N). Throws
// ringd::Error naming the host when the agent cannot be reached (kIo, kTimeout), authenticated
// (kAuth), refuses the command (kInvalidArgument) or goes away mid-run (kPeerLost).
int run_remote_command(const RemoteCommand& command);

// Whether `host` resolves to an IPv4 address (what getaddrinfo says, now).
bool host_resolves(const std::string& host);

// One authenticated ping. "" when the agent answered (its name in *agent_name), else why not:
// "does not resolve", "connection refused", "wrong job secret: ...", "timed out".
std::string ping_agent(const std::string& host, uint16_t port, const std::string& secret,
                       std::chrono::milliseconds timeout, std::string* agent_name = nullptr);

}  // namespace ringd::launcher
