// The exec service's wire protocol on a socket pair: mutual proof of the job secret, then frames
// whose sequence numbers and MACs make replayed, reordered, altered or reflected frames fail.
#include "launcher/exec_protocol.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <future>

#include "ringd/error.h"

namespace ringd::launcher::exec {
namespace {

struct Connected {
  net::Fd client;
  net::Fd server;
  SessionKeys client_keys;
  SessionKeys server_keys;
};

Deadline soon() { return net::Clock::now() + std::chrono::seconds(5); }

std::pair<net::Fd, net::Fd> socket_pair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  return {net::Fd(fds[0]), net::Fd(fds[1])};
}

Connected connect(const std::string& client_secret, const std::string& server_secret) {
  Connected c;
  std::tie(c.client, c.server) = socket_pair();
  auto server = std::async(std::launch::async, [&] {
    return server_handshake(c.server.get(), server_secret, "test client", soon());
  });
  c.client_keys = client_handshake(c.client.get(), client_secret, "test agent", soon());
  c.server_keys = server.get();
  return c;
}

ErrorCode code_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.code();
  }
  return ErrorCode::kInternal;
}

TEST(ExecProtocol, MatchingSecretsAgreeOnDirectionalKeys) {
  Connected c = connect("s3cret", "s3cret");
  EXPECT_EQ(c.client_keys.send, c.server_keys.receive);
  EXPECT_EQ(c.client_keys.receive, c.server_keys.send);
  EXPECT_NE(c.client_keys.send, c.client_keys.receive);  // a reflected frame fails its MAC

  Channel client(c.client.get(), c.client_keys, "agent");
  Channel server(c.server.get(), c.server_keys, "client");
  client.send(MessageType::kRun, "orted -mca x y", soon());
  client.send(MessageType::kStdin, std::string(100000, 'z'), soon());
  MessageType type;
  std::string payload;
  ASSERT_TRUE(server.receive(&type, &payload, soon()));
  EXPECT_EQ(type, MessageType::kRun);
  EXPECT_EQ(payload, "orted -mca x y");
  ASSERT_TRUE(server.receive(&type, &payload, soon()));
  EXPECT_EQ(payload.size(), 100000u);
  c.client.reset();
  EXPECT_FALSE(server.receive(&type, &payload, soon()));  // clean end between frames
}

TEST(ExecProtocol, WrongSecretFailsOnBothSides) {
  auto [client_fd, server_fd] = socket_pair();
  auto server = std::async(std::launch::async, [&, fd = server_fd.get()] {
    return code_of([&] { server_handshake(fd, "agent-secret", "client", soon()); });
  });
  // The client checks the agent's proof first, so it learns of the mismatch before sending any
  // command; it then sends a proof that cannot be right, so the agent records the failure too.
  EXPECT_EQ(code_of([&] { client_handshake(client_fd.get(), "other", "agent", soon()); }),
            ErrorCode::kAuth);
  client_fd.reset();
  EXPECT_EQ(server.get(), ErrorCode::kAuth);
}

TEST(ExecProtocol, ForeignPeerIsAProtocolError) {
  auto [client_fd, server_fd] = socket_pair();
  const char junk[] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_EQ(::send(client_fd.get(), junk, sizeof(junk) - 1, 0),
            static_cast<ssize_t>(sizeof(junk) - 1));
  EXPECT_EQ(code_of([&] { server_handshake(server_fd.get(), "s", "client", soon()); }),
            ErrorCode::kProtocol);
}

// Sends raw bytes as if an attacker on the path wrote them.
void inject(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
}

TEST(ExecProtocol, ReplayedFrameIsRejected) {
  Connected c = connect("k", "k");
  Channel client(c.client.get(), c.client_keys, "agent");
  Channel server(c.server.get(), c.server_keys, "client");
  const std::string frame = client.encode(MessageType::kStdin, "rm -rf");
  inject(c.client.get(), frame);
  inject(c.client.get(), frame);  // the same bytes again
  MessageType type;
  std::string payload;
  ASSERT_TRUE(server.receive(&type, &payload, soon()));
  try {
    server.receive(&type, &payload, soon());
    FAIL() << "replayed frame accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kAuth);
    EXPECT_NE(std::string(error.what()).find("replayed or reordered"), std::string::npos);
  }
}

TEST(ExecProtocol, ReorderedAndReflectedFramesAreRejected) {
  Connected c = connect("k", "k");
  Channel client(c.client.get(), c.client_keys, "agent");
  Channel server(c.server.get(), c.server_keys, "client");
  const std::string first = client.encode(MessageType::kStdin, "a");
  const std::string second = client.encode(MessageType::kStdin, "b");
  inject(c.client.get(), second);
  MessageType type;
  std::string payload;
  EXPECT_EQ(code_of([&] { server.receive(&type, &payload, soon()); }), ErrorCode::kAuth);

  Connected d = connect("k", "k");
  Channel agent(d.server.get(), d.server_keys, "client");
  Channel caller(d.client.get(), d.client_keys, "agent");
  // A frame the agent sent, reflected back to it as if the client had sent it.
  inject(d.client.get(), agent.encode(MessageType::kStdin, "x"));
  EXPECT_EQ(code_of([&] { agent.receive(&type, &payload, soon()); }), ErrorCode::kAuth);
  (void)first;
  (void)caller;
}

TEST(ExecProtocol, AlteredFrameIsRejected) {
  for (size_t position : {0u, 5u, 9u, 17u, 20u}) {
    Connected c = connect("k", "k");
    Channel client(c.client.get(), c.client_keys, "agent");
    Channel server(c.server.get(), c.server_keys, "client");
    std::string frame = client.encode(MessageType::kRun, "orted -mca a b");
    frame[position] ^= 0x01;
    inject(c.client.get(), frame);
    c.client.reset();
    MessageType type;
    std::string payload;
    const ErrorCode code = code_of([&] { server.receive(&type, &payload, soon()); });
    // Byte 5 is in the payload length: the frame then looks 256 bytes longer and never completes.
    const ErrorCode expected = position == 5 ? ErrorCode::kPeerLost : ErrorCode::kAuth;
    EXPECT_EQ(code, expected) << "altered byte " << position << ": " << error_code_name(code);
  }
}

TEST(ExecProtocol, AFrameFromAnotherConnectionIsRejected) {
  Connected first = connect("k", "k");
  Connected second = connect("k", "k");
  Channel old_client(first.client.get(), first.client_keys, "agent");
  Channel server(second.server.get(), second.server_keys, "client");
  inject(second.client.get(), old_client.encode(MessageType::kRun, "orted"));
  MessageType type;
  std::string payload;
  EXPECT_EQ(code_of([&] { server.receive(&type, &payload, soon()); }), ErrorCode::kAuth);
}

}  // namespace
}  // namespace ringd::launcher::exec
