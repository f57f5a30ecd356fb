// The ibverbs transport's message protocol (channel.h: slots, chunking, credits, tag/size checks,
// abort, timeouts, failures) over an in-process fake fabric, so it runs without RDMA hardware.
// The verbs calls underneath (queue_pair.cc, completion_loop.cc) are NOT exercised here.
#include <gtest/gtest.h>

#include "ringd/config.h"

#if RINGD_HAVE_IBVERBS

#include <cstring>
#include <functional>
#include <thread>

#include "transport/ibverbs_fake_fabric.h"

namespace ringd {
namespace {

using std::chrono::milliseconds;
using testing::fake_ibverbs_contexts;
using testing::FakeFabric;

uint8_t pattern(int from, int to, size_t index, size_t offset) {
  return static_cast<uint8_t>((from * 131 + to * 31 + index * 7 + offset * 13 + (offset >> 10)) &
                              0xFF);
}

std::vector<uint8_t> make_message(int from, int to, size_t index, size_t bytes) {
  std::vector<uint8_t> message(bytes);
  for (size_t i = 0; i < bytes; ++i) message[i] = pattern(from, to, index, i);
  return message;
}

// Runs body(rank) on one thread per context; rethrows the first exception.
void run_ranks(std::vector<std::unique_ptr<Context>>& contexts,
               const std::function<void(Context&)>& body) {
  std::mutex mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (auto& context : contexts) {
    threads.emplace_back([&, ctx = context.get()] {
      try {
        body(*ctx);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (first) std::rethrow_exception(first);
}

// The ringd::Error `body` throws; fails the test when it throws nothing or something else.
Error error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "no ringd::Error thrown";
  return Error(ErrorCode::kInternal, "");
}

class IbverbsMeshTest : public ::testing::TestWithParam<int> {};

TEST_P(IbverbsMeshTest, EveryRankExchangesWithEveryPeer) {
  const int size = GetParam();
  auto fabric = std::make_shared<FakeFabric>();
  auto contexts = fake_ibverbs_contexts(size, fabric);
  run_ranks(contexts, [&](Context& ctx) {
    const int rank = ctx.rank();
    EXPECT_EQ(ctx.transport_name(), "ibverbs");
    std::vector<std::vector<uint8_t>> outgoing(size), incoming(size);
    std::vector<RequestPtr> requests;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      outgoing[peer] = make_message(rank, peer, 0, 1000 + 17 * rank);
      incoming[peer].assign(1000 + 17 * peer, 0);
      requests.push_back(ctx.pair(peer).irecv(incoming[peer].data(), incoming[peer].size(), 7));
      requests.push_back(ctx.pair(peer).isend(outgoing[peer].data(), outgoing[peer].size(), 7));
    }
    for (auto& request : requests) request->wait(ctx.timeout());
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      EXPECT_EQ(incoming[peer], make_message(peer, rank, 0, 1000 + 17 * peer));
      EXPECT_EQ(ctx.pair(peer).peer_description(),
                "rank " + std::to_string(peer) + " (fake fabric)");
    }
  });
  EXPECT_EQ(fabric->violations(), "");
}

INSTANTIATE_TEST_SUITE_P(Ranks, IbverbsMeshTest, ::testing::Range(2, 7));

// Sizes around the slot payload (256-byte slots: 192 bytes of payload), zero bytes, and far more
// messages than slots, in both directions at once.
TEST(IbverbsChannel, ManyMessagesOfEverySizeBothDirectionsInOrder) {
  auto fabric = std::make_shared<FakeFabric>();
  auto contexts = fake_ibverbs_contexts(2, fabric);
  constexpr size_t kMessages = 500;
  const auto size_of = [](size_t i) {
    static const size_t kSizes[] = {0, 1, 191, 192, 193, 384, 385, 1000, 4099};
    return kSizes[i % 9] + (i / 9) % 3;
  };
  run_ranks(contexts, [&](Context& ctx) {
    const int peer = 1 - ctx.rank();
    std::vector<std::vector<uint8_t>> outgoing(kMessages), incoming(kMessages);
    std::vector<RequestPtr> sends, receives;
    for (size_t i = 0; i < kMessages; ++i) {
      incoming[i].assign(size_of(i), 0xEE);
      receives.push_back(ctx.pair(peer).irecv(incoming[i].data(), incoming[i].size(), i));
    }
    for (size_t i = 0; i < kMessages; ++i) {
      outgoing[i] = make_message(ctx.rank(), peer, i, size_of(i));
      sends.push_back(ctx.pair(peer).isend(outgoing[i].data(), outgoing[i].size(), i));
    }
    for (auto& request : receives) request->wait(ctx.timeout());
    for (auto& request : sends) request->wait(ctx.timeout());
    for (size_t i = 0; i < kMessages; ++i) {
      ASSERT_EQ(incoming[i], make_message(peer, ctx.rank(), i, size_of(i))) << "message " << i;
    }
  });
  EXPECT_EQ(fabric->violations(), "");
}

TEST(IbverbsChannel, LargeMessageCyclesTheCreditsManyTimes) {
  auto fabric = std::make_shared<FakeFabric>();
  auto contexts = fake_ibverbs_contexts(2, fabric, {8, 4096});
  constexpr size_t kBytes = 4u << 20;  // ~1030 slots through a window of 8
  run_ranks(contexts, [&](Context& ctx) {
    const int peer = 1 - ctx.rank();
    const std::vector<uint8_t> outgoing = make_message(ctx.rank(), peer, 1, kBytes);
    std::vector<uint8_t> incoming(kBytes, 0);
    auto receive = ctx.pair(peer).irecv(incoming.data(), kBytes, make_tag(1, 0));
    auto send = ctx.pair(peer).isend(outgoing.data(), kBytes, make_tag(1, 0));
    receive->wait(ctx.timeout());
    send->wait(ctx.timeout());
    ASSERT_EQ(incoming, make_message(peer, ctx.rank(), 1, kBytes));
  });
  EXPECT_EQ(fabric->violations(), "");
}

// With no receive posted the sender stops after exactly `slots` writes; the rest waits at the
// sender (credits), and is delivered once the receiver posts.
TEST(IbverbsChannel, SenderNeverOverrunsTheReceiver) {
  auto fabric = std::make_shared<FakeFabric>();
  auto contexts = fake_ibverbs_contexts(2, fabric, {4, 256});
  Context& sender = *contexts[0];
  Context& receiver = *contexts[1];
  std::vector<std::vector<uint8_t>> outgoing;
  std::vector<RequestPtr> sends;
  for (size_t i = 0; i < 10; ++i) {
    outgoing.push_back(make_message(0, 1, i, 100));
    sends.push_back(sender.pair(1).isend(outgoing.back().data(), 100, i));
  }
  fabric->wait_idle();
  EXPECT_EQ(fabric->data_writes(0, 1), 4u);  // the window, not one more
  std::vector<std::vector<uint8_t>> incoming(10, std::vector<uint8_t>(100));
  for (size_t i = 0; i < 10; ++i) {
    receiver.pair(0).irecv(incoming[i].data(), 100, i)->wait(receiver.timeout());
    EXPECT_EQ(incoming[i], outgoing[i]) << "message " << i;
  }
  for (auto& send : sends) send->wait(sender.timeout());
  fabric->wait_idle();
  EXPECT_EQ(fabric->data_writes(0, 1), 10u);
  EXPECT_EQ(fabric->violations(), "");
}

TEST(IbverbsChannel, TagMismatchFailsTheReceiverAndReachesTheSender) {
  auto fabric = std::make_shared<FakeFabric>();
  auto contexts = fake_ibverbs_contexts(2, fabric);
  Context& a = *contexts[0];
  Context& b = *contexts[1];
  std::vector<uint8_t> out(300, 1), in(300, 0), reply(8);
  auto send = a.pair(1).isend(out.data(), out.size(), make_tag(5, 0));
  auto pending = a.pair(1).irecv(reply.data(), reply.size(), make_tag(5, 1));
  const Error mismatch =
      error_of([&] { b.pair(0).irecv(in.data(), in.size(), make_tag(6, 0))->wait(b.timeout()); });
  EXPECT_EQ(mismatch.code(), ErrorCode::kMismatch) << mismatch.what();
  const std::string text = mismatch.what();
  EXPECT_NE(text.find("rank 1: message mismatch with peer rank 0 (fake fabric)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("operation 6"), std::string::npos) << text;
  EXPECT_NE(text.find("operation 5"), std::string::npos) << text;
  // The peer learns why (an abort notice), instead of waiting for its timeout.
  const Error told = error_of([&] { pending->wait(a.timeout()); });
  EXPECT_EQ(told.code(), ErrorCode::kPeerLost) << told.what();
  EXPECT_NE(std::string(told.what()).find("aborted: rank 1: message mismatch"), std::string::npos)
      << told.what();
  // Later requests on the failed pair fail the same way at once.
  const Error again =
      error_of([&] { b.pair(0).irecv(in.data(), in.size(), make_tag(7, 0))->wait(b.timeout()); });
  EXPECT_EQ(again.code(), ErrorCode::kMismatch);
}

TEST(IbverbsChannel, SizeMismatchIsAMismatch) {
  auto fabric = std::make_shared<FakeFabric>();
  auto contexts = fake_ibverbs_contexts(2, fabric);
  std::vector<uint8_t> out(500, 1), in(400, 0);
  contexts[0]->pair(1).isend(out.data(), out.size(), 3);
  const Error error = error_of(
      [&] { contexts[1]->pair(0).irecv(in.data(), in.size(), 3)->wait(contexts[1]->timeout()); });
  EXPECT_EQ(error.code(), ErrorCode::kMismatch) << error.what();
  EXPECT_NE(std::string(error.what()).find("400 bytes, but the peer sent"), std::string::npos)
      << error.what();
}

TEST(IbverbsChannel, AbortCarriesTheReasonToThePeer) {
  auto fabric = std::make_shared<FakeFabric>();
  auto contexts = fake_ibverbs_contexts(3, fabric);
  std::vector<uint8_t> in(64);
  auto pending = contexts[1]->pair(2).irecv(in.data(), in.size(), 9);
  contexts[2]->abort("rank 2: the disk caught fire");
  const Error error = error_of([&] { pending->wait(contexts[1]->timeout()); });
  EXPECT_EQ(error.code(), ErrorCode::kPeerLost);
  EXPECT_NE(std::string(error.what())
                .find("rank 1: peer rank 2 (fake fabric) aborted: rank 2: "
                      "the disk caught fire"),
            std::string::npos)
      << error.what();
  // The aborting rank's own requests fail too.
  const Error own = error_of(
      [&] { contexts[2]->pair(0).isend(in.data(), in.size(), 1)->wait(contexts[2]->timeout()); });
  EXPECT_EQ(own.code(), ErrorCode::kPeerLost);
}

TEST(IbverbsChannel, TimedOutWaitFailsThePairAndTellsThePeer) {
  auto fabric = std::make_shared<FakeFabric>();
  auto contexts = fake_ibverbs_contexts(2, fabric);
  std::vector<uint8_t> in(32);
  auto peer_pending = contexts[0]->pair(1).irecv(in.data(), in.size(), make_tag(2, 1));
  const auto start = std::chrono::steady_clock::now();
  const Error error = error_of([&] {
    contexts[1]->pair(0).irecv(in.data(), in.size(), make_tag(2, 0))->wait(milliseconds(150));
  });
  EXPECT_EQ(error.code(), ErrorCode::kTimeout);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(150));
  EXPECT_NE(std::string(error.what())
                .find("rank 1: timed out after 150 ms waiting to receive 32 "
                      "bytes (tag"),
            std::string::npos)
      << error.what();
  const Error told = error_of([&] { peer_pending->wait(contexts[0]->timeout()); });
  EXPECT_EQ(told.code(), ErrorCode::kPeerLost);
  EXPECT_NE(std::string(told.what()).find("aborted: rank 1: timed out"), std::string::npos)
      << told.what();
}

TEST(IbverbsChannel, DeadPeerFailsTheSenderWithPeerLost) {
  auto fabric = std::make_shared<FakeFabric>();
  auto contexts = fake_ibverbs_contexts(2, fabric);
  fabric->kill_rank(1);
  std::vector<uint8_t> out(10, 1), in(10);
  auto receive = contexts[0]->pair(1).irecv(in.data(), in.size(), 2);
  contexts[0]->pair(1).isend(out.data(), out.size(), 1);
  const Error error = error_of([&] { receive->wait(contexts[0]->timeout()); });
  EXPECT_EQ(error.code(), ErrorCode::kPeerLost);
  EXPECT_NE(std::string(error.what()).find("retry counter exceeded"), std::string::npos)
      << error.what();
}

TEST(IbverbsChannel, CorruptSlotIsAProtocolError) {
  auto fabric = std::make_shared<FakeFabric>();
  auto contexts = fake_ibverbs_contexts(2, fabric);
  fabric->corrupt_next_write_from(0);
  std::vector<uint8_t> out(10, 1), in(10);
  contexts[0]->pair(1).isend(out.data(), out.size(), 1);
  const Error error = error_of(
      [&] { contexts[1]->pair(0).irecv(in.data(), in.size(), 1)->wait(contexts[1]->timeout()); });
  EXPECT_EQ(error.code(), ErrorCode::kProtocol);
  EXPECT_NE(std::string(error.what()).find("corrupt ibverbs stream from peer rank 0"),
            std::string::npos)
      << error.what();
}

TEST(IbverbsChannel, DestroyedContextFailsItsPendingRequestsAndThePeerLearns) {
  auto fabric = std::make_shared<FakeFabric>();
  auto contexts = fake_ibverbs_contexts(2, fabric);
  std::vector<uint8_t> in(16);
  auto orphan = contexts[1]->pair(0).irecv(in.data(), in.size(), 1);
  contexts[1]->abort("rank 1 is shutting down");
  contexts[1].reset();
  const Error error = error_of([&] { orphan->wait(milliseconds(1000)); });
  EXPECT_EQ(error.code(), ErrorCode::kPeerLost);
  const Error peer = error_of(
      [&] { contexts[0]->pair(1).irecv(in.data(), in.size(), 1)->wait(contexts[0]->timeout()); });
  EXPECT_NE(std::string(peer.what()).find("aborted: rank 1 is shutting down"), std::string::npos)
      << peer.what();
}

}  // namespace
}  // namespace ringd

#else  // !RINGD_HAVE_IBVERBS

TEST(IbverbsChannel, NotBuilt) { GTEST_SKIP() << "built without rdma-core (RINGD_HAVE_IBVERBS=0)"; }

#endif
