// Failures on the tcp transport surface as ringd::Error with the right code and a message naming
// the rank and peer: tag/size mismatch, a peer that dies mid-receive, a receive nobody answers, a
// wrong job secret, a rank that never shows up, and a context destroyed with requests pending.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "transport/tcp_test_support.h"

namespace ringd {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::connect_ranks;
using testing::expect_error;
using testing::loopback_options;
using testing::run_ranks;

TEST(TcpFault, TagMismatchFailsTheReceiver) {
  MemoryStore store;
  auto contexts = connect_ranks(2, store, std::chrono::seconds(10));
  int sent = 1, received = 0;
  auto send = contexts[0]->pair(1).isend(&sent, sizeof(sent), make_tag(5, 1));
  auto receive = contexts[1]->pair(0).irecv(&received, sizeof(received), make_tag(5, 2));
  const Error error = expect_error([&] { receive->wait(milliseconds(10000)); });
  EXPECT_EQ(error.code(), ErrorCode::kMismatch);
  RINGD_EXPECT_CONTAINS(error.what(), ("rank 1: message mismatch with peer rank 0 (127.0.0.1:"));
  RINGD_EXPECT_CONTAINS(error.what(), ("operation 5, message 2"));
  RINGD_EXPECT_CONTAINS(error.what(), ("operation 5, message 1"));
  EXPECT_EQ(received, 0);
  // The pair stays failed with the same error.
  const Error later = expect_error([&] {
    contexts[1]->pair(0).irecv(&received, sizeof(received), 9)->wait(milliseconds(1000));
  });
  EXPECT_EQ(later.code(), ErrorCode::kMismatch);
}

TEST(TcpFault, SizeMismatchFailsTheReceiver) {
  MemoryStore store;
  auto contexts = connect_ranks(2, store, std::chrono::seconds(10));
  std::vector<uint8_t> out(100, 1), in(64, 0);
  auto send = contexts[0]->pair(1).isend(out.data(), out.size(), 3);
  const Error error = expect_error(
      [&] { contexts[1]->pair(0).irecv(in.data(), in.size(), 3)->wait(milliseconds(10000)); });
  EXPECT_EQ(error.code(), ErrorCode::kMismatch);
  RINGD_EXPECT_CONTAINS(error.what(), ("64 bytes, but the peer sent tag 0x3"));
  RINGD_EXPECT_CONTAINS(error.what(), ("100 bytes"));
}

TEST(TcpFault, PeerDestroyedMidReceiveIsPeerLost) {
  MemoryStore store;
  auto contexts = connect_ranks(2, store, std::chrono::seconds(10));
  std::promise<void> receive_posted;
  std::vector<uint8_t> buffer(1 << 20);
  const milliseconds timeout(8000);
  run_ranks(2, [&](int rank) {
    if (rank == 1) {
      receive_posted.get_future().wait();
      contexts[1].reset();  // the peer "dies": its sockets close
      return;
    }
    auto receive = contexts[0]->pair(1).irecv(buffer.data(), buffer.size(), 1);
    receive_posted.set_value();
    const auto start = Clock::now();
    const Error error = expect_error([&] { receive->wait(timeout); });
    EXPECT_LT(Clock::now() - start, timeout);
    EXPECT_EQ(error.code(), ErrorCode::kPeerLost);
    RINGD_EXPECT_CONTAINS(error.what(), ("rank 0: connection to peer rank 1 (127.0.0.1:"));
    RINGD_EXPECT_CONTAINS(error.what(), ("the peer process probably died"));
    // Sends fail the same way from now on.
    const Error later =
        expect_error([&] { contexts[0]->pair(1).isend(buffer.data(), 10, 2)->wait(timeout); });
    EXPECT_EQ(later.code(), ErrorCode::kPeerLost);
  });
}

TEST(TcpFault, ReceiveNobodyAnswersTimesOut) {
  MemoryStore store;
  auto contexts = connect_ranks(2, store, std::chrono::seconds(10));
  std::vector<uint8_t> buffer(4096);
  auto receive = contexts[0]->pair(1).irecv(buffer.data(), buffer.size(), make_tag(3, 4));
  const auto start = Clock::now();
  const Error error = expect_error([&] { receive->wait(milliseconds(300)); });
  EXPECT_GE(Clock::now() - start, milliseconds(300));
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
  EXPECT_EQ(error.code(), ErrorCode::kTimeout);
  RINGD_EXPECT_CONTAINS(
      error.what(),
      ("rank 0: timed out after 300 ms waiting to receive 4096 bytes (tag 0x30000000004"
       " (operation 3, message 4)) from peer rank 1 (127.0.0.1:"));
  // The timed-out pair is closed on both sides: the peer sees the connection go away.
  const Error peer_error = expect_error(
      [&] { contexts[1]->pair(0).irecv(buffer.data(), 1, 1)->wait(milliseconds(5000)); });
  EXPECT_EQ(peer_error.code(), ErrorCode::kPeerLost);
}

TEST(TcpFault, WrongSecretFailsWithAuthAndIsLogged) {
  MemoryStore store;
  ::testing::internal::CaptureStderr();
  std::vector<ErrorCode> codes(2, ErrorCode::kInternal);
  std::vector<std::string> messages(2);
  run_ranks(2, [&](int rank) {
    const Error error = expect_error([&] {
      tcp_connect(store, rank, 2,
                  loopback_options(milliseconds(2000), rank == 0 ? "secret-a" : "secret-b"));
    });
    codes[rank] = error.code();
    messages[rank] = error.what();
  });
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(codes[1], ErrorCode::kAuth) << messages[1];
  RINGD_EXPECT_CONTAINS(messages[1], ("failed the job-secret handshake"));
  EXPECT_EQ(codes[0], ErrorCode::kAuth) << messages[0];
  RINGD_EXPECT_CONTAINS(messages[0], ("peer rank(s) 1 never passed the job-secret handshake"));
  RINGD_EXPECT_CONTAINS(log, ("rank 0: rejected connection from 127.0.0.1:"));
  RINGD_EXPECT_CONTAINS(log, ("wrong job secret"));
}

// The first rank to reach the store records the job's size with its id; a rank started with
// another size is refused there, before any connection, naming both sizes.
TEST(TcpFault, WorldSizeMismatchIsRefused) {
  MemoryStore store;
  ::testing::internal::CaptureStderr();
  std::vector<Error> errors(2, Error(ErrorCode::kInternal, ""));
  run_ranks(2, [&](int rank) {
    if (rank == 1) store.get("tcp/0", milliseconds(5000));  // rank 0 created the job record
    errors[rank] = expect_error(
        [&] { tcp_connect(store, rank, rank == 0 ? 2 : 3, loopback_options(milliseconds(1500))); });
  });
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(errors[1].code(), ErrorCode::kMismatch) << errors[1].what();
  RINGD_EXPECT_CONTAINS(errors[1].what(),
                        "on this rendezvous store has 2 ranks, this rank was started with 3");
  EXPECT_EQ(errors[0].code(), ErrorCode::kTimeout) << errors[0].what();
  RINGD_EXPECT_CONTAINS(errors[0].what(), "did every rank start, with the same world size?");
}

TEST(TcpFault, AbortTellsThePeerWhy) {
  MemoryStore store;
  auto contexts = connect_ranks(2, store, std::chrono::seconds(10));
  int received = 0;
  auto receive = contexts[0]->pair(1).irecv(&received, sizeof(received), 1);
  contexts[1]->abort("rank 1: allreduce #3 failed: the root cause");
  const Error error = expect_error([&] { receive->wait(milliseconds(5000)); });
  EXPECT_EQ(error.code(), ErrorCode::kPeerLost);
  RINGD_EXPECT_CONTAINS(error.what(), "rank 0: peer rank 1 (127.0.0.1:");
  RINGD_EXPECT_CONTAINS(error.what(), "aborted: rank 1: allreduce #3 failed: the root cause");
  // The aborting side's own pair is failed too.
  const Error own = expect_error([&] {
    contexts[1]->pair(0).isend(&received, sizeof(received), 2)->wait(milliseconds(1000));
  });
  EXPECT_EQ(own.code(), ErrorCode::kPeerLost);
}

TEST(TcpFault, AbortFinishesAPartlySentMessageFromACopy) {
  // Rank 1 aborts while a 32 MB send may be part-way onto the wire (rank 0 has not posted its
  // receive, so the kernel buffers fill). The stream must stay intact: rank 0 gets either the
  // whole, correct message and then the abort, or the abort at once; never corrupt data.
  MemoryStore store;
  auto contexts = connect_ranks(2, store, std::chrono::seconds(10));
  constexpr size_t kBytes = 32u << 20;
  std::vector<uint8_t> outgoing(kBytes), incoming(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i) outgoing[i] = static_cast<uint8_t>(i * 31 + (i >> 16));
  const std::vector<uint8_t> expected = outgoing;
  auto send = contexts[1]->pair(0).isend(outgoing.data(), kBytes, 1);
  int small = 0;
  auto small_send = contexts[1]->pair(0).isend(&small, sizeof(small), 2);
  contexts[1]->abort("rank 1 gave up");
  std::fill(outgoing.begin(), outgoing.end(), 0xFF);  // the caller may reuse its buffer now
  EXPECT_EQ(expect_error([&] { send->wait(milliseconds(1000)); }).code(), ErrorCode::kPeerLost);
  try {
    contexts[0]->pair(1).irecv(incoming.data(), kBytes, 1)->wait(milliseconds(10000));
    EXPECT_TRUE(incoming == expected) << "the partly sent message arrived corrupted";
    const Error after = expect_error(
        [&] { contexts[0]->pair(1).irecv(&small, sizeof(small), 2)->wait(milliseconds(10000)); });
    EXPECT_EQ(after.code(), ErrorCode::kPeerLost);
    RINGD_EXPECT_CONTAINS(after.what(), "aborted: rank 1 gave up");
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kPeerLost);
    RINGD_EXPECT_CONTAINS(error.what(), "aborted: rank 1 gave up");
  }
}

TEST(TcpFault, MissingRankTimesOutNamingIt) {
  MemoryStore store;
  const auto start = Clock::now();
  const Error error =
      expect_error([&] { tcp_connect(store, 0, 3, loopback_options(milliseconds(500))); });
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
  EXPECT_EQ(error.code(), ErrorCode::kTimeout);
  RINGD_EXPECT_CONTAINS(error.what(), ("waiting for peer rank(s) 1, 2 to connect"));
  // Rank 0's address is still in the store but nobody listens there any more.
  const Error stale =
      expect_error([&] { tcp_connect(store, 2, 3, loopback_options(milliseconds(500))); });
  EXPECT_EQ(stale.code(), ErrorCode::kTimeout);
  RINGD_EXPECT_CONTAINS(stale.what(), "rank 2: could not connect to peer rank 0 (127.0.0.1:");
  // With a fresh store, rank 0 never published anything.
  MemoryStore empty_store;
  const Error unpublished =
      expect_error([&] { tcp_connect(empty_store, 2, 3, loopback_options(milliseconds(300))); });
  EXPECT_EQ(unpublished.code(), ErrorCode::kTimeout);
  RINGD_EXPECT_CONTAINS(unpublished.what(), "rank 2: waiting for the address of peer rank 0");
  RINGD_EXPECT_CONTAINS(unpublished.what(), "tcp/0");
}

// Small receives are read by the waiting thread itself, asleep in poll() on the socket (see
// transport/tcp/pair.h). Every way the pair can fail must wake it; a missed wake-up would show as
// the full 20 s timeout.
TEST(TcpFault, SmallReceiveWaiterSeesPeerDeath) {
  MemoryStore store;
  auto contexts = connect_ranks(2, store, std::chrono::seconds(10));
  std::promise<void> receive_posted;
  std::vector<uint8_t> buffer(64);
  const milliseconds timeout(20000);
  run_ranks(2, [&](int rank) {
    if (rank == 1) {
      receive_posted.get_future().wait();
      contexts[1].reset();
      return;
    }
    auto receive = contexts[0]->pair(1).irecv(buffer.data(), buffer.size(), 1);
    receive_posted.set_value();
    const auto start = Clock::now();
    const Error error = expect_error([&] { receive->wait(timeout); });
    EXPECT_LT(Clock::now() - start, timeout / 2);
    EXPECT_EQ(error.code(), ErrorCode::kPeerLost) << error.what();
  });
}

TEST(TcpFault, SmallReceiveWaiterWokenWhenAnotherThreadAbortsThePair) {
  MemoryStore store;
  auto contexts = connect_ranks(2, store, std::chrono::seconds(10));
  std::vector<uint8_t> buffer(64);
  const milliseconds timeout(20000);
  auto receive = contexts[0]->pair(1).irecv(buffer.data(), buffer.size(), 1);
  const auto start = Clock::now();
  std::thread aborter([&] { contexts[0]->pair(1).abort("a test gives up"); });
  const Error error = expect_error([&] { receive->wait(timeout); });
  aborter.join();
  EXPECT_LT(Clock::now() - start, timeout / 2);
  EXPECT_EQ(error.code(), ErrorCode::kPeerLost) << error.what();
  RINGD_EXPECT_CONTAINS(error.what(), "a test gives up");
  // The peer learns why, too.
  const Error peer_error =
      expect_error([&] { contexts[1]->pair(0).irecv(buffer.data(), 8, 2)->wait(timeout); });
  RINGD_EXPECT_CONTAINS(peer_error.what(), "aborted: ");
  RINGD_EXPECT_CONTAINS(peer_error.what(), "a test gives up");
}

TEST(TcpFault, SmallReceiveWaiterWokenWhenTheContextIsDestroyed) {
  MemoryStore store;
  auto contexts = connect_ranks(2, store, std::chrono::seconds(10));
  std::vector<uint8_t> buffer(64);
  const milliseconds timeout(20000);
  auto receive = contexts[0]->pair(1).irecv(buffer.data(), buffer.size(), 1);
  const auto start = Clock::now();
  std::thread destroyer([&] { contexts[0].reset(); });
  const Error error = expect_error([&] { receive->wait(timeout); });
  destroyer.join();
  EXPECT_LT(Clock::now() - start, timeout / 2);
  EXPECT_NE(error.code(), ErrorCode::kTimeout) << error.what();
}

TEST(TcpFault, DestroyingAContextWithPendingRequestsDoesNotHang) {
  MemoryStore store;
  auto contexts = connect_ranks(2, store, std::chrono::seconds(10));
  std::vector<uint8_t> big(32u << 20, 7), small(16);
  auto send = contexts[0]->pair(1).isend(big.data(), big.size(), 1);  // cannot finish: no receiver
  auto receive = contexts[0]->pair(1).irecv(small.data(), small.size(), 2);
  const auto start = Clock::now();
  contexts[0].reset();
  contexts[1].reset();
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  EXPECT_NE(expect_error([&] { receive->wait(milliseconds(1000)); }).code(), ErrorCode::kTimeout);
  EXPECT_NE(expect_error([&] { send->wait(milliseconds(1000)); }).code(), ErrorCode::kTimeout);
}

}  // namespace
}  // namespace ringd
