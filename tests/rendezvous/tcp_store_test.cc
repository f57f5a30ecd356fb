// TcpStoreServer / TcpStore specifics: clients that start before the server, wrong secrets,
// garbage and oversized requests (rejected without hurting other clients), a transport pair
// dialing the store, timeouts naming the server, and a server that goes away.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <future>
#include <random>
#include <thread>

#include "rendezvous/tcp_store_protocol.h"
#include "ringd/error.h"
#include "ringd/tcp.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/socket.h"
#include "transport/tcp_test_support.h"

namespace ringd {
namespace {

using std::chrono::milliseconds;

#define EXPECT_CONTAINS RINGD_EXPECT_CONTAINS
using testing::closed_by_peer;
using testing::expect_error;
using testing::in;

tcp::Fd raw_connection(uint16_t port) {
  int error = 0;
  tcp::Fd socket =
      tcp::connect_to(tcp::Endpoint{"127.0.0.1", port}, 0, in(milliseconds(5000)), &error);
  EXPECT_TRUE(socket.valid()) << tcp::errno_text(error);
  return socket;
}

TEST(TcpStore, ClientRetriesUntilTheServerStarts) {
  uint16_t port;
  {
    tcp::Fd probe = tcp::listen_on("127.0.0.1", 0, 0);
    port = tcp::local_port(probe.get());
  }  // free again: the client's first attempts are refused
  std::promise<void> client_started;
  auto client = std::async(std::launch::async, [&] {
    client_started.set_value();
    TcpStore store("127.0.0.1", port, "s", milliseconds(10000));
    return to_string(store.get("late", milliseconds(10000)));
  });
  client_started.get_future().wait();
  TcpStoreServer server("127.0.0.1", port, "s");
  TcpStore("127.0.0.1", port, "s", milliseconds(5000)).set("late", to_bytes("value"));
  EXPECT_EQ(client.get(), "value");
}

TEST(TcpStore, WrongSecretIsRejected) {
  TcpStoreServer server("127.0.0.1", 0, "right");
  ::testing::internal::CaptureStderr();
  const Error error =
      expect_error([&] { TcpStore("127.0.0.1", server.port(), "wrong", milliseconds(3000)); });
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(error.code(), ErrorCode::kAuth) << error.what();
  EXPECT_CONTAINS(log, "rejected connection from 127.0.0.1:");
  EXPECT_CONTAINS(log, "wrong job secret");
}

TEST(TcpStore, GarbageAndPairsAreRejectedWhileClientsKeepWorking) {
  TcpStoreServer server("127.0.0.1", 0, "s");
  TcpStore good("127.0.0.1", server.port(), "s", milliseconds(5000));
  good.set("before", to_bytes("1"));
  ::testing::internal::CaptureStderr();
  {
    tcp::Fd socket = raw_connection(server.port());
    std::vector<uint8_t> garbage(1 << 20);
    std::mt19937 random(7);
    for (auto& byte : garbage) byte = static_cast<uint8_t>(random());
    int error = 0;
    tcp::send_all(socket.get(), garbage.data(), garbage.size(), in(milliseconds(5000)), &error);
    EXPECT_TRUE(closed_by_peer(socket.get(), in(milliseconds(5000))));
  }
  {
    tcp::Fd socket = raw_connection(server.port());
    tcp::HelloInfo pair;  // a transport pair dialing the store's port
    pair.rank = 1;
    pair.target_rank = 0;
    pair.world_size = 2;
    const Error error = expect_error([&] {
      tcp::dial_handshake(socket.get(), "s", pair, -1, "rank 1", "store", in(milliseconds(5000)));
    });
    EXPECT_EQ(error.code(), ErrorCode::kMismatch) << error.what();
    EXPECT_CONTAINS(error.what(), "this port serves the TCP store");
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_CONTAINS(log, "not a ringd peer");
  good.set("after", to_bytes("2"));
  EXPECT_EQ(to_string(good.get("before", milliseconds(1000))), "1");
  EXPECT_EQ(to_string(good.get("after", milliseconds(1000))), "2");
}

// Sends a raw request header after a real handshake; returns the server's error text.
std::string oversized_request(uint16_t port, uint32_t key_bytes, uint64_t value_bytes) {
  tcp::Fd socket = raw_connection(port);
  tcp::HelloInfo hello;
  hello.kind = tcp::PeerKind::kStoreClient;
  tcp::dial_handshake(socket.get(), "s", hello, -1, "test", "store", in(milliseconds(5000)));
  const store_protocol::RequestHeader header{store_protocol::kMagic, 1, key_bytes, 0, value_bytes};
  int error = 0;
  EXPECT_EQ(tcp::send_all(socket.get(), &header, sizeof(header), in(milliseconds(5000)), &error),
            tcp::IoStatus::kOk);
  store_protocol::ResponseHeader response{};
  EXPECT_EQ(
      tcp::recv_exact(socket.get(), &response, sizeof(response), in(milliseconds(5000)), &error),
      tcp::IoStatus::kOk);
  EXPECT_EQ(response.status, static_cast<uint32_t>(store_protocol::Status::kError));
  std::string text(response.value_bytes, '\0');
  tcp::recv_exact(socket.get(), text.data(), text.size(), in(milliseconds(5000)), &error);
  EXPECT_TRUE(closed_by_peer(socket.get(), in(milliseconds(5000))));
  return text;
}

TEST(TcpStore, OversizedKeysAndValuesAreProtocolErrors) {
  TcpStoreServer server("127.0.0.1", 0, "s");
  ::testing::internal::CaptureStderr();
  EXPECT_CONTAINS(oversized_request(server.port(), 4097, 0), "key of 4097 bytes exceeds");
  EXPECT_CONTAINS(oversized_request(server.port(), 3, (64u << 20) + 1), "value of 67108865 bytes");
  ::testing::internal::GetCapturedStderr();
  TcpStore client("127.0.0.1", server.port(), "s", milliseconds(5000));
  EXPECT_EQ(expect_error([&] { client.set(std::string(4097, 'k'), {}); }).code(),
            ErrorCode::kInvalidArgument);
  client.set(std::string(4096, 'k'), std::vector<uint8_t>(1 << 20, 9));  // at the limits: fine
  EXPECT_EQ(client.get(std::string(4096, 'k'), milliseconds(1000)).size(), 1u << 20);
}

TEST(TcpStore, GetTimeoutNamesKeyAndServer) {
  TcpStoreServer server("127.0.0.1", 0, "s");
  TcpStore client("127.0.0.1", server.port(), "s", milliseconds(5000));
  const Error error = expect_error([&] { client.get("tcp/7", milliseconds(100)); });
  EXPECT_EQ(error.code(), ErrorCode::kTimeout);
  EXPECT_CONTAINS(error.what(), "key 'tcp/7'");
  EXPECT_CONTAINS(error.what(), "127.0.0.1:" + std::to_string(server.port()));
}

TEST(TcpStore, ServerGoingAwayFailsAWaitingGet) {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0, "s");
  TcpStore client("127.0.0.1", server->port(), "s", milliseconds(5000));
  client.set("k", to_bytes("v"));  // the connection is established and served
  auto waiting = std::async(std::launch::async, [&] {
    return expect_error([&] { client.get("never", milliseconds(20000)); });
  });
  const auto start = tcp::Clock::now();
  server.reset();
  const Error error = waiting.get();
  EXPECT_LT(tcp::Clock::now() - start, milliseconds(10000));
  EXPECT_EQ(error.code(), ErrorCode::kPeerLost) << error.what();
}

}  // namespace
}  // namespace ringd
