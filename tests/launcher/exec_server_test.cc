// The agent's exec service end to end on loopback: authentication, the allow-list, stdio and exit
// codes, that a child (with its whole process group) dies when its caller goes away or sends a
// forged or replayed frame, and the bounds that keep a flood of connections from taking it down.
#include "launcher/exec_server.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <system_error>
#include <thread>

#include "launcher/exec_client.h"
#include "launcher/exec_protocol.h"
#include "ringd/error.h"
#include "testing/process_stats.h"

namespace ringd::launcher {
namespace {

using exec::MessageType;

constexpr const char* kSecret = "exec-server-test-secret";

std::unique_ptr<ExecServer> start_server(
    std::vector<std::string> allowed = {},
    const std::function<void(ExecServerOptions*)>& adjust = nullptr) {
  ExecServerOptions options;
  options.bind_host = "127.0.0.1";
  options.port = 0;
  options.secret = kSecret;
  options.allowed = std::move(allowed);
  options.name = "ringd-1";
  options.kill_grace = std::chrono::milliseconds(500);
  if (adjust) adjust(&options);
  return std::make_unique<ExecServer>(options);
}

// A temporary file as an fd, read back whole.
struct Capture {
  FILE* file = std::tmpfile();
  int fd() const { return fileno(file); }
  std::string text() const {
    std::string out;
    std::rewind(file);
    char buffer[4096];
    size_t got;
    while ((got = std::fread(buffer, 1, sizeof(buffer), file)) > 0) out.append(buffer, got);
    return out;
  }
  ~Capture() { std::fclose(file); }
};

RemoteCommand remote(const ExecServer& server, const std::string& line) {
  RemoteCommand command;
  command.host = "127.0.0.1";
  command.port = server.port();
  command.secret = kSecret;
  command.command_line = line;
  command.stdin_fd = -1;
  return command;
}

// Polls `condition` every 10 ms for up to `seconds` (the processes involved are not ours to wait
// on, so there is nothing to block on).
bool eventually(const std::function<bool()>& condition, int seconds = 10) {
  for (int i = 0; i < seconds * 100; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

// Gone, or a zombie waiting for an init that may not reap it (containers).
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  FILE* stat = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!stat) return true;
  char state = '?';
  const int fields = std::fscanf(stat, "%*d (%*[^)]) %c", &state);
  std::fclose(stat);
  return fields == 1 && state == 'Z';
}

TEST(ExecServer, RefusesToStartWithoutASecret) {
  ExecServerOptions options;
  options.port = 0;
  EXPECT_THROW(ExecServer server(options), Error);
}

TEST(ExecServer, WrongSecretIsRejectedAndNothingRuns) {
  auto server = start_server({"sh"});
  RemoteCommand command = remote(*server, "sh -c 'echo ran'");
  command.secret = "not-the-job-secret";
  try {
    run_remote_command(command);
    FAIL() << "a caller with the wrong secret was served";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kAuth) << error.what();
  }
  EXPECT_TRUE(eventually([&] { return server->stats().auth_failures.load() == 1; }));
  EXPECT_EQ(server->stats().started.load(), 0u);
  EXPECT_NE(ping_agent("127.0.0.1", server->port(), "wrong", std::chrono::seconds(5)), "");
}

TEST(ExecServer, DisallowedCommandIsRefused) {
  auto server = start_server();  // orted, prted, ringd
  for (const char* line : {"sh -c 'echo ran'", "orted ; sh", "/bin/cat /etc/shadow"}) {
    try {
      run_remote_command(remote(*server, line));
      FAIL() << "ran: " << line;
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument) << error.what();
      EXPECT_NE(std::string(error.what()).find("refused"), std::string::npos) << error.what();
    }
  }
  EXPECT_EQ(server->stats().refused.load(), 3u);
  EXPECT_EQ(server->stats().started.load(), 0u);
}

TEST(ExecServer, StdioAndExitCodeAreForwarded) {
  auto server = start_server({"sh"});
  Capture out, err, in;
  std::fputs("line one\nline two\n", in.file);
  std::fflush(in.file);
  std::rewind(in.file);
  RemoteCommand command = remote(*server, "sh -c 'cat; echo to-stderr >&2; exit 7'");
  command.stdin_fd = in.fd();
  command.stdout_fd = out.fd();
  command.stderr_fd = err.fd();
  EXPECT_EQ(run_remote_command(command), 7);
  EXPECT_EQ(out.text(), "line one\nline two\n");
  EXPECT_EQ(err.text(), "to-stderr\n");

  Capture out2;
  RemoteCommand big = remote(*server, "sh -c 'head -c 300000 /dev/zero'");
  big.stdout_fd = out2.fd();
  EXPECT_EQ(run_remote_command(big), 0);
  EXPECT_EQ(out2.text().size(), 300000u);

  EXPECT_EQ(run_remote_command(remote(*server, "sh -c 'kill -TERM $$'")), 128 + SIGTERM);
  EXPECT_EQ(server->stats().started.load(), 3u);
}

TEST(ExecServer, ProgramThatDoesNotExistIsRefused) {
  auto server = start_server({"no-such-program-ringd"});
  try {
    run_remote_command(remote(*server, "no-such-program-ringd --x"));
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what())
                  .find("cannot run no-such-program-ringd: not found in the "
                        "agent's PATH="),
              std::string::npos)
        << error.what();
  }
}

TEST(ExecServer, PingAnswersWithTheAgentsName) {
  auto server = start_server();
  std::string name;
  EXPECT_EQ(ping_agent("127.0.0.1", server->port(), kSecret, std::chrono::seconds(5), &name), "");
  EXPECT_EQ(name, "ringd-1");
  EXPECT_NE(ping_agent("no-such-host.invalid", server->port(), kSecret, std::chrono::seconds(1)),
            "");
}

// A short name that does not resolve is what Open MPI sends when it cuts a hostfile's FQDN (seen on
// a real cluster, scripts/e2e_k8s.sh): the error says so instead of blaming the Service.
TEST(ExecClient, AShortNameThatDoesNotResolveIsExplained) {
  for (const char* host : {"no-such-pod-ringd", "no-such-pod-ringd.ringd.default.svc.invalid"}) {
    RemoteCommand command;
    command.host = host;
    command.secret = kSecret;
    command.command_line = "ringd --version";
    try {
      run_remote_command(command);
      ADD_FAILURE() << host << " resolved";
    } catch (const Error& error) {
      const std::string what = error.what();
      const bool short_name = std::string(host).find('.') == std::string::npos;
      EXPECT_NE(what.find(std::string(host) + " does not resolve"), std::string::npos) << what;
      EXPECT_EQ(what.find("orte_keep_fqdn_hostnames") != std::string::npos, short_name) << what;
      EXPECT_EQ(what.find("publishNotReadyAddresses") != std::string::npos, !short_name) << what;
    }
  }
}

// A raw client: connects, authenticates, starts `line`, returns the channel and the child's pid.
struct RawClient {
  net::Fd fd;
  std::unique_ptr<exec::Channel> channel;
  pid_t pid = -1;
};

RawClient start_raw(const ExecServer& server, const std::string& line) {
  RawClient client;
  int error = 0;
  const auto deadline = net::Clock::now() + std::chrono::seconds(5);
  client.fd = net::connect_to(net::Endpoint{"127.0.0.1", server.port()}, {}, deadline, &error);
  EXPECT_TRUE(client.fd.valid());
  const exec::SessionKeys keys =
      exec::client_handshake(client.fd.get(), kSecret, "agent", deadline);
  client.channel = std::make_unique<exec::Channel>(client.fd.get(), keys, "agent");
  client.channel->send(MessageType::kRun, line, deadline);
  MessageType type;
  std::string payload;
  EXPECT_TRUE(client.channel->receive(&type, &payload, deadline));
  EXPECT_EQ(type, MessageType::kStarted) << payload;
  client.pid = std::stoi(payload);
  return client;
}

// The first line the child printed (a grandchild's pid).
pid_t read_pid_line(RawClient* client) {
  MessageType type;
  std::string payload;
  const auto deadline = net::Clock::now() + std::chrono::seconds(5);
  EXPECT_TRUE(client->channel->receive(&type, &payload, deadline));
  EXPECT_EQ(type, MessageType::kStdout);
  return std::stoi(payload);
}

TEST(ExecServer, DisconnectKillsTheChildAndItsProcessGroup) {
  auto server = start_server({"sh"});
  RawClient client = start_raw(*server, "sh -c 'sleep 60 & echo $!; wait'");
  const pid_t grandchild = read_pid_line(&client);
  EXPECT_FALSE(process_gone(client.pid));
  EXPECT_FALSE(process_gone(grandchild));
  client.fd.reset();  // the caller (mpirun's rsh agent) goes away
  EXPECT_TRUE(eventually([&] { return process_gone(client.pid); })) << "child " << client.pid;
  EXPECT_TRUE(eventually([&] { return process_gone(grandchild); })) << "grandchild " << grandchild;
  EXPECT_TRUE(eventually([&] { return server->stats().running.load() == 0; }));
  EXPECT_EQ(server->stats().killed.load(), 1u);
}

TEST(ExecServer, ReplayedFrameKillsTheChild) {
  auto server = start_server({"sh"});
  RawClient client = start_raw(*server, "sh -c 'sleep 60 & echo $!; wait'");
  const pid_t grandchild = read_pid_line(&client);
  const std::string frame = client.channel->encode(MessageType::kStdin, "data");
  ASSERT_EQ(::send(client.fd.get(), frame.data(), frame.size(), 0), (ssize_t)frame.size());
  ASSERT_EQ(::send(client.fd.get(), frame.data(), frame.size(), 0), (ssize_t)frame.size());
  EXPECT_TRUE(eventually([&] { return process_gone(grandchild); }));
  EXPECT_TRUE(eventually([&] { return server->stats().auth_failures.load() == 1; }));
  EXPECT_EQ(server->stats().killed.load(), 1u);
}

TEST(ExecServer, TamperedFrameKillsTheChild) {
  auto server = start_server({"sh"});
  RawClient client = start_raw(*server, "sh -c 'sleep 60 & echo $!; wait'");
  const pid_t grandchild = read_pid_line(&client);
  std::string frame = client.channel->encode(MessageType::kStdin, "data");
  frame[exec::kFrameHeaderBytes] ^= 0x20;  // "data" -> "Data"
  ASSERT_EQ(::send(client.fd.get(), frame.data(), frame.size(), 0), (ssize_t)frame.size());
  EXPECT_TRUE(eventually([&] { return process_gone(grandchild); }));
  EXPECT_TRUE(eventually([&] { return server->stats().auth_failures.load() == 1; }));
}

TEST(ExecServer, StopKillsRunningChildren) {
  auto server = start_server({"sh"});
  RawClient client = start_raw(*server, "sh -c 'sleep 60 & echo $!; wait'");
  const pid_t grandchild = read_pid_line(&client);
  server->stop();  // returns once every connection thread has finished
  EXPECT_TRUE(process_gone(client.pid));
  EXPECT_TRUE(eventually([&] { return process_gone(grandchild); }));
}

// What a caller that holds the secret may run (exec_allow_list.h), end to end.

std::string refusal_of(const ExecServer& server, const std::string& line) {
  try {
    Capture out;
    RemoteCommand command = remote(server, line);
    command.stdout_fd = out.fd();
    run_remote_command(command);
    return "ran, printing: " + out.text();
  } catch (const Error& error) {
    return error.what();
  }
}

// A scratch directory, removed at the end.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    char pattern[] = "/tmp/ringd-exec-server-XXXXXX";
    path = ::mkdtemp(pattern);
  }
  ~ScratchDir() { std::system(("rm -rf " + path).c_str()); }
  std::string script(const std::string& name, const std::string& body) const {
    const std::string file = path + "/" + name;
    std::ofstream(file) << "#!/bin/sh\n" << body << "\n";
    ::chmod(file.c_str(), 0755);
    return file;
  }
};

TEST(ExecServer, AProgramNamedLikeAnAllowedOneElsewhereIsRefused) {
  auto server = start_server();  // orted, prted, ringd
  ScratchDir dir;
  ASSERT_EQ(::symlink("/bin/sh", (dir.path + "/orted").c_str()), 0);
  dir.script("ringd", "echo ran");
  for (const std::string& line : {dir.path + "/orted -c 'echo ran'", dir.path + "/ringd"}) {
    const std::string refusal = refusal_of(*server, line);
    EXPECT_NE(refusal.find("refused to run the command: program '" +
                           line.substr(0, line.find(' ')) + "' is not allowed here"),
              std::string::npos)
        << refusal;
  }
  EXPECT_EQ(server->stats().started.load(), 0u);
}

TEST(ExecServer, ACommandsPathDoesNotChooseTheProgram) {
  ScratchDir dir;
  dir.script("sh", "echo impostor");
  auto server = start_server({"sh"});
  Capture out;
  RemoteCommand command = remote(*server, "PATH=" + dir.path + ":$PATH sh -c 'echo real'");
  command.stdout_fd = out.fd();
  EXPECT_EQ(run_remote_command(command), 0);
  EXPECT_EQ(out.text(), "real\n");
}

TEST(ExecServer, LoaderAndUnlistedVariablesAreRefused) {
  auto server = start_server({"sh"});
  const std::string preload = refusal_of(*server, "LD_PRELOAD=/tmp/x.so sh -c 'echo ran'");
  EXPECT_NE(preload.find("environment assignment LD_PRELOAD=/tmp/x.so refused: LD_* and DYLD_* "
                         "variables are never passed to a command"),
            std::string::npos)
      << preload;
  const std::string other = refusal_of(*server, "BASH_ENV=/tmp/x ; export BASH_ENV ; sh -c 'echo'");
  EXPECT_NE(other.find("a command may set only PATH and OMPI_*"), std::string::npos) << other;
  EXPECT_EQ(server->stats().started.load(), 0u);
}

// Bounds under a flood of connections (issue 15).

using ::ringd::testing::cpu_seconds;
using ::ringd::testing::thread_count;

net::Fd silent_connection(const ExecServer& server) {
  int error = 0;
  return net::connect_to(net::Endpoint{"127.0.0.1", server.port()}, {},
                         net::Clock::now() + std::chrono::seconds(5), &error);
}

TEST(ExecServer, SilentConnectionsCostNoThreadAndKeepNoCommandOut) {
  auto server = start_server({"sh"});
  const int threads_before = thread_count();
  std::vector<net::Fd> flood;
  for (int i = 0; i < 300; ++i) flood.push_back(silent_connection(*server));
  ASSERT_TRUE(eventually([&] { return server->stats().connections.load() == 300; }));
  // One thread per connection made 300 here (and aborted the agent under a pids limit).
  EXPECT_LE(thread_count(), threads_before + 2);
  // From one address the agent keeps 8 handshakes; the rest were pushed out, newest kept.
  EXPECT_TRUE(eventually([&] { return server->stats().handshakes_dropped.load() >= 292; }));

  const auto started = std::chrono::steady_clock::now();
  Capture out;
  RemoteCommand command = remote(*server, "sh -c 'echo served'");
  command.stdout_fd = out.fd();
  EXPECT_EQ(run_remote_command(command), 0);
  EXPECT_EQ(out.text(), "served\n");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  std::string name;
  EXPECT_EQ(ping_agent("127.0.0.1", server->port(), kSecret, std::chrono::seconds(5), &name), "");
}

TEST(ExecServer, ASilentConnectionIsDroppedAtItsDeadline) {
  auto server = start_server({}, [](ExecServerOptions* options) {
    options->handshake_timeout = std::chrono::milliseconds(300);
  });
  net::Fd silent = silent_connection(*server);
  const auto started = std::chrono::steady_clock::now();
  pollfd fd{silent.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&fd, 1, 5000), 1);
  char byte;
  EXPECT_EQ(::recv(silent.get(), &byte, 1, 0), 0);  // closed by the agent
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_GE(waited, std::chrono::milliseconds(250));
  EXPECT_LT(waited, std::chrono::seconds(2));
  // Counted just after the close.
  EXPECT_TRUE(eventually([&] { return server->stats().handshakes_dropped.load() == 1u; }));
}

TEST(ExecServer, RunningOutOfFileDescriptorsNeitherSpinsNorStopsTheService) {
  auto server = start_server({"sh"});
  std::vector<net::Fd> clients;
  for (int i = 0; i < 4; ++i) clients.emplace_back(::socket(AF_INET, SOCK_STREAM, 0));
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  const int lowest_free = ::dup(0);
  ::close(lowest_free);
  rlimit lowered = saved;
  lowered.rlim_cur = static_cast<rlim_t>(lowest_free);  // no descriptor left for accept()
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  sockaddr_in agent{};
  agent.sin_family = AF_INET;
  agent.sin_port = htons(server->port());
  agent.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (const net::Fd& client : clients) {
    EXPECT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&agent), sizeof(agent)), 0);
  }
  const double cpu_before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double cpu_used = cpu_seconds() - cpu_before;
  const uint64_t failures = server->stats().accept_failures.load();
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  // A listener that stays readable while accept() fails made the acceptor spin at 100% CPU.
  EXPECT_LT(cpu_used, 0.25) << failures << " failed accepts";
  EXPECT_GE(failures, 1u);
  EXPECT_LE(failures, 20u);  // one try per 100 ms pause
  EXPECT_TRUE(eventually([&] { return server->stats().connections.load() == 4; }));
  EXPECT_EQ(run_remote_command(remote(*server, "sh -c 'exit 3'")), 3);
}

TEST(ExecServer, AThreadThatCannotStartRefusesTheCommandAndTheServiceGoesOn) {
  std::atomic<bool> fail{true};
  auto server = start_server({"sh"}, [&](ExecServerOptions* options) {
    options->start_thread = [&](std::function<void()> body) {
      if (fail.load()) throw std::system_error(EAGAIN, std::generic_category(), "thread");
      std::thread(std::move(body)).detach();
    };
  });
  const std::string refusal = refusal_of(*server, "sh -c 'echo ran'");
  EXPECT_NE(refusal.find("refused to run the command: the agent ringd-1 cannot start a thread for "
                         "the command"),
            std::string::npos)
      << refusal;
  EXPECT_EQ(server->stats().refused.load(), 1u);
  fail = false;
  EXPECT_EQ(run_remote_command(remote(*server, "sh -c 'exit 4'")), 4);
}

TEST(ExecServer, CommandConnectionsAreCapped) {
  auto server = start_server({"sh"}, [](ExecServerOptions* options) { options->max_commands = 1; });
  RawClient first = start_raw(*server, "sh -c 'sleep 60 & echo $!; wait'");
  const pid_t grandchild = read_pid_line(&first);
  const std::string refusal = refusal_of(*server, "sh -c 'echo ran'");
  EXPECT_NE(refusal.find("the agent ringd-1 already serves 1 exec connections, its limit"),
            std::string::npos)
      << refusal;
  first.fd.reset();
  EXPECT_TRUE(eventually([&] { return process_gone(grandchild); }));
  EXPECT_TRUE(eventually([&] {
    try {
      return run_remote_command(remote(*server, "sh -c 'exit 5'")) == 5;
    } catch (const Error&) {
      return false;  // the first connection's thread has not finished yet
    }
  }));
}

}  // namespace
}  // namespace ringd::launcher
