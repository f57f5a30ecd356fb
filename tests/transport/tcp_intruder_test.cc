// Intruders on a rank's listening port (which stays open for the whole job): random bytes, a
// foreign protocol version, a silent connection, a wrong secret, a duplicate rank. Each is
// rejected, logged and closed, and the job's own exchange completes correctly meanwhile.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <future>
#include <random>

#include "net/handshake.h"
#include "net/socket.h"
#include "transport/tcp_test_support.h"

namespace ringd {
namespace {

using std::chrono::milliseconds;
using testing::connect_ranks;
using testing::expect_error;
using testing::run_ranks;

using testing::closed_by_peer;
using testing::in;

net::Fd connect_to_rank(Store& store, int rank) {
  const net::Endpoint endpoint = net::parse_endpoint(
      to_string(store.get("tcp/" + std::to_string(rank), milliseconds(10000))), "test");
  int error = 0;
  net::Fd socket = net::connect_to(endpoint, {}, in(milliseconds(5000)), &error);
  EXPECT_TRUE(socket.valid()) << net::errno_text(error);
  return socket;
}

// Both ranks exchange `rounds` checked 64 KiB messages each way; rank 0 waits for `midway`
// half-way through, so whatever it waits for happens while the job is running.
void exchange(std::vector<std::unique_ptr<Context>>& contexts, int rounds,
              std::shared_future<void> midway) {
  run_ranks(2, [&](int rank) {
    Context& ctx = *contexts[rank];
    const int peer = 1 - rank;
    std::vector<uint32_t> out(16384), in(16384);
    for (int round = 0; round < rounds; ++round) {
      if (rank == 0 && round == rounds / 2) midway.wait();
      for (size_t i = 0; i < out.size(); ++i) out[i] = (rank << 28) ^ (round << 16) ^ i;
      auto receive = ctx.pair(peer).irecv(in.data(), in.size() * 4, round);
      auto send = ctx.pair(peer).isend(out.data(), out.size() * 4, round);
      receive->wait(ctx.timeout());
      send->wait(ctx.timeout());
      for (size_t i = 0; i < in.size(); ++i) {
        ASSERT_EQ(in[i], (peer << 28) ^ (round << 16) ^ i) << "round " << round;
      }
    }
  });
}

TEST(TcpIntruder, GarbageAndForeignVersionDuringAnExchange) {
  MemoryStore store;
  auto contexts = connect_ranks(2, store);
  ::testing::internal::CaptureStderr();
  std::atomic<bool> garbage_closed{false}, version_closed{false};
  std::promise<void> intruders_done;
  std::thread intruders([&] {
    {  // 1 MB of random bytes
      net::Fd socket = connect_to_rank(store, 0);
      std::vector<uint8_t> garbage(1 << 20);
      std::mt19937 random(12345);
      for (auto& byte : garbage) byte = static_cast<uint8_t>(random());
      int error = 0;
      net::send_all(socket.get(), garbage.data(), garbage.size(), in(milliseconds(10000)), &error);
      garbage_closed = closed_by_peer(socket.get(), in(milliseconds(10000)));
    }
    {  // a well-formed header of protocol v99
      net::Fd socket = connect_to_rank(store, 0);
      std::vector<uint8_t> hello = net::encode_handshake_header(net::HandshakeType::kHello, 48, 99);
      hello.resize(hello.size() + 48, 0);
      int error = 0;
      net::send_all(socket.get(), hello.data(), hello.size(), in(milliseconds(10000)), &error);
      version_closed = closed_by_peer(socket.get(), in(milliseconds(10000)));
    }
    intruders_done.set_value();
  });
  exchange(contexts, 200, intruders_done.get_future().share());
  intruders.join();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(garbage_closed);
  EXPECT_TRUE(version_closed);
  RINGD_EXPECT_CONTAINS(log, "rank 0: rejected connection from 127.0.0.1:");
  RINGD_EXPECT_CONTAINS(log, "not a ringd peer");
  RINGD_EXPECT_CONTAINS(
      log, "peer speaks ringd protocol v99, this is v" + std::to_string(net::kProtocolVersion));
}

TEST(TcpIntruder, WrongSecretAndDuplicateRankAreRejected) {
  MemoryStore store;
  auto contexts = connect_ranks(2, store);
  const std::string address = to_string(store.get("tcp/0", milliseconds(1000)));
  net::HelloInfo hello;
  hello.rank = 1;
  hello.target_rank = 0;
  hello.world_size = 2;
  hello.address = "intruder";
  hello.job_id = to_string(store.get("ringd/job", milliseconds(1000))).substr(0, 32);
  ::testing::internal::CaptureStderr();
  std::promise<void> intruders_done;
  std::vector<Error> errors;
  std::thread intruders([&] {
    for (const std::string secret : {"not-the-secret", "test-secret"}) {
      net::Fd socket = connect_to_rank(store, 0);
      errors.push_back(expect_error([&] {
        net::dial_handshake(socket.get(), secret, hello, 0, "intruder", "rank 0 (" + address + ")",
                            in(milliseconds(5000)));
      }));
    }
    intruders_done.set_value();
  });
  exchange(contexts, 100, intruders_done.get_future().share());
  intruders.join();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].code(), ErrorCode::kAuth) << errors[0].what();
  EXPECT_EQ(errors[1].code(), ErrorCode::kMismatch) << errors[1].what();
  RINGD_EXPECT_CONTAINS(errors[1].what(), "duplicate connection for rank 1");
  RINGD_EXPECT_CONTAINS(log, "wrong job secret (HMAC proof mismatch) from rank 1 of 2 at intruder");
  RINGD_EXPECT_CONTAINS(log, "duplicate connection for rank 1, which is already connected");
}

TEST(TcpIntruder, SilentConnectionDoesNotBlockTheMeshAndTimesOut) {
  MemoryStore store;
  ::testing::internal::CaptureStderr();
  std::vector<std::unique_ptr<Context>> contexts(2);
  net::Fd silent, half_header;
  std::promise<void> intruders_connected;
  std::shared_future<void> connected = intruders_connected.get_future().share();
  run_ranks(3, [&](int thread) {
    if (thread == 2) {  // the intruder: two connections that never finish a handshake
      silent = connect_to_rank(store, 0);
      half_header = connect_to_rank(store, 0);
      int error = 0;
      net::send_all(half_header.get(), "RNGD\x01", 5, in(milliseconds(1000)), &error);
      intruders_connected.set_value();
      return;
    }
    if (thread == 1) connected.wait();  // rank 1 dials only while the intruders sit there
    contexts[thread] = tcp_connect(store, thread, 2, testing::loopback_options());
  });
  std::promise<void> nothing;
  nothing.set_value();
  exchange(contexts, 10, nothing.get_future().share());
  // The acceptor's handshake deadline closes both.
  EXPECT_TRUE(closed_by_peer(silent.get(), in(net::kHandshakeTimeout + milliseconds(5000))));
  EXPECT_TRUE(closed_by_peer(half_header.get(), in(milliseconds(5000))));
  const std::string log = ::testing::internal::GetCapturedStderr();
  RINGD_EXPECT_CONTAINS(log, "handshake not completed within 5000 ms");
}

TEST(TcpIntruder, DialerReportsAForeignProtocolVersion) {
  net::Fd listener = net::listen_on("127.0.0.1", 0, {});
  const uint16_t port = net::local_port(listener.get());
  std::thread fake_acceptor([&] {
    pollfd entry{listener.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&entry, 1, 5000), 1);
    net::Fd socket(::accept(listener.get(), nullptr, nullptr));
    std::vector<uint8_t> reply =
        net::encode_handshake_header(net::HandshakeType::kChallenge, 0, net::kProtocolVersion + 1);
    int error = 0;
    net::send_all(socket.get(), reply.data(), reply.size(), in(milliseconds(5000)), &error);
    closed_by_peer(socket.get(), in(milliseconds(5000)));
  });
  int error = 0;
  net::Fd socket =
      net::connect_to(net::Endpoint{"127.0.0.1", port}, {}, in(milliseconds(5000)), &error);
  ASSERT_TRUE(socket.valid());
  net::HelloInfo hello;
  hello.rank = 1;
  hello.target_rank = 0;
  hello.world_size = 2;
  const Error result = expect_error([&] {
    net::dial_handshake(socket.get(), "s", hello, 0, "rank 1", "peer rank 0",
                        in(milliseconds(5000)));
  });
  socket.reset();
  fake_acceptor.join();
  EXPECT_EQ(result.code(), ErrorCode::kProtocol);
  const uint32_t version = net::kProtocolVersion;
  RINGD_EXPECT_CONTAINS(result.what(), "rank 1: peer rank 0: peer speaks ringd protocol v" +
                                           std::to_string(version + 1) + ", this is v" +
                                           std::to_string(version));
}

// Issue 15, item 1, on a rank's listening port: 200 silent connections, re-dialed as soon as they
// are closed, sit on rank 0 before ranks 1..3 dial it. The ranks still connect within a timeout
// shorter than the 5 s handshake deadline, and rank 0's log stays short.
TEST(TcpIntruder, AFloodOfSilentConnectionsDoesNotKeepRanksOut) {
  MemoryStore store;
  ::testing::internal::CaptureStderr();
  std::vector<std::unique_ptr<Context>> contexts(4);
  std::promise<void> flooding;
  std::shared_future<void> flood_started = flooding.get_future().share();
  std::unique_ptr<testing::SilentFlood> flood;
  run_ranks(5, [&](int thread) {
    if (thread == 4) {
      const net::Endpoint rank0 =
          net::parse_endpoint(to_string(store.get("tcp/0", milliseconds(10000))), "test");
      flood = std::make_unique<testing::SilentFlood>(rank0, 200);
      flooding.set_value();
      return;
    }
    if (thread > 0) flood_started.wait();
    contexts[thread] = tcp_connect(store, thread, 4, testing::loopback_options(milliseconds(4000)));
  });
  flood.reset();
  const std::string log = ::testing::internal::GetCapturedStderr();
  run_ranks(4, [&](int rank) {
    std::vector<float> value{static_cast<float>(rank + 1)};
    for (int peer = 0; peer < 4; ++peer) {
      if (peer == rank) continue;
      float got = 0;
      auto receive = contexts[rank]->pair(peer).irecv(&got, sizeof(got), 7);
      contexts[rank]->pair(peer).isend(value.data(), sizeof(float), 7)->wait(milliseconds(5000));
      receive->wait(milliseconds(5000));
      EXPECT_EQ(got, static_cast<float>(peer + 1));
    }
  });
  EXPECT_LE(testing::count_lines(log, "rejected connection") +
                testing::count_lines(log, "more connections rejected"),
            11u)
      << log.substr(0, 4000);
}

}  // namespace
}  // namespace ringd
