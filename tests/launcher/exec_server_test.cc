// The agent's exec service end to end on loopback: authentication, the allow-list, stdio and exit
// codes, and that a child (with its whole process group) dies when its caller goes away or sends
// a forged or replayed frame.
#include "launcher/exec_server.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "launcher/exec_client.h"
#include "launcher/exec_protocol.h"
#include "ringd/error.h"

namespace ringd::launcher {
namespace {

using exec::MessageType;

constexpr const char* kSecret = "exec-server-test-secret";

std::unique_ptr<ExecServer> start_server(std::vector<std::string> allowed = {}) {
  ExecServerOptions options;
  options.bind_host = "127.0.0.1";
  options.port = 0;
  options.secret = kSecret;
  options.allowed = std::move(allowed);
  options.name = "ringd-1";
  options.kill_grace = std::chrono::milliseconds(500);
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
    EXPECT_NE(std::string(error.what()).find("cannot run no-such-program-ringd"), std::string::npos)
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

// A raw client: connects, authenticates, starts `line`, returns the channel and the child's pid.
struct RawClient {
  tcp::Fd fd;
  std::unique_ptr<exec::Channel> channel;
  pid_t pid = -1;
};

RawClient start_raw(const ExecServer& server, const std::string& line) {
  RawClient client;
  int error = 0;
  const auto deadline = tcp::Clock::now() + std::chrono::seconds(5);
  client.fd = tcp::connect_to(tcp::Endpoint{"127.0.0.1", server.port()}, 0, deadline, &error);
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
  const auto deadline = tcp::Clock::now() + std::chrono::seconds(5);
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

}  // namespace
}  // namespace ringd::launcher
