// Parameter-server failures, each reaching the trainer as a ringd::Error that names who and what,
// in bounded time: wrong job secret, no server, a server that dies, a worker that dies, a worker
// that stops pushing (timeout naming it), a worker describing another model, and foreign or
// truncated bytes sent to a server (rejected, and the server keeps serving real workers).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>

#include "net/handshake.h"
#include "ps/frame.h"
#include "ps/ps_sync.h"
#include "ps/ps_test_support.h"
#include "ringd/error.h"

namespace ringd::ps {
namespace {

using std::chrono::milliseconds;
using testing::Servers;
using testing::ToyModel;

const std::vector<size_t> kCounts = {40, 5, 12};
constexpr uint8_t kVersion = static_cast<uint8_t>(kFrameVersion);  // of hand-made frames

// Runs `body`, which must throw ringd::Error of `code` with every string of `needles` in its
// message.
template <typename Body>
void expect_error(Body body, ErrorCode code, const std::vector<std::string>& needles) {
  try {
    body();
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), code) << error.what();
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos)
          << "'" << needle << "' not in: " << error.what();
    }
    return;
  }
  ADD_FAILURE() << "no error (expected " << error_code_name(code) << ")";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(PsErrors, WrongSecretIsRejected) {
  Servers servers(1, "the-right-secret");
  ToyModel model(kCounts, 0);
  PsSync sync(testing::worker_options(servers, 0, 1, ShardPolicy::kRoundRobin, false, "wrong"));
  expect_error([&] { sync.initialize(model.views); }, ErrorCode::kAuth, {});
}

TEST(PsErrors, UnreachableServerTimesOutNamingIt) {
  std::string address;
  {
    Servers gone(1, "s");  // a port that was just free and is closed again
    address = gone.addresses[0];
  }
  Servers dummy(0, "s");
  dummy.addresses = {address};
  PsSyncOptions options =
      testing::worker_options(dummy, 0, 1, ShardPolicy::kRoundRobin, false, "s");
  options.timeout = milliseconds(1000);
  ToyModel model(kCounts, 0);
  PsSync sync(options);
  const auto start = std::chrono::steady_clock::now();
  expect_error([&] { sync.initialize(model.views); }, ErrorCode::kTimeout,
               {"parameter server 0 (" + address + ")", "ringd ps"});
  EXPECT_LT(seconds_since(start), 10);
}

TEST(PsErrors, DeadServerIsNamed) {
  Servers servers(2, "s");
  const std::string dead = servers.addresses[1];
  std::vector<std::unique_ptr<ToyModel>> models;
  std::vector<std::unique_ptr<PsSync>> syncs;
  for (int rank = 0; rank < 2; ++rank) {
    models.push_back(std::make_unique<ToyModel>(kCounts, rank));
    syncs.push_back(std::make_unique<PsSync>(
        testing::worker_options(servers, rank, 2, ShardPolicy::kRoundRobin, false, "s")));
  }
  testing::run_workers(2, [&](int rank) {
    syncs[rank]->initialize(models[rank]->views);
    testing::train(*syncs[rank], *models[rank], rank, 0, 1);
  });
  servers.servers[1].reset();  // server 1 goes away between steps
  const auto start = std::chrono::steady_clock::now();
  testing::run_workers(2, [&](int rank) {
    expect_error([&] { testing::train(*syncs[rank], *models[rank], rank, 1, 1); },
                 ErrorCode::kPeerLost, {"parameter server 1 (" + dead + ")"});
  });
  EXPECT_LT(seconds_since(start), 10);
}

TEST(PsErrors, DeadWorkerIsNamedToTheOthers) {
  Servers servers(1, "s");
  ToyModel model0(kCounts, 0);
  PsSync sync0(testing::worker_options(servers, 0, 2, ShardPolicy::kRoundRobin, false, "s"));
  std::thread worker1([&] {
    try {
      ToyModel model1(kCounts, 1);
      PsSync sync1(testing::worker_options(servers, 1, 2, ShardPolicy::kRoundRobin, false, "s"));
      sync1.initialize(model1.views);
      testing::train(sync1, model1, 1, 0, 1);
      throw std::runtime_error("worker 1 crashes");  // sync1 is destroyed while unwinding
    } catch (const std::runtime_error&) {
    }
  });
  sync0.initialize(model0.views);
  testing::train(sync0, model0, 0, 0, 1);
  worker1.join();
  const auto start = std::chrono::steady_clock::now();
  // Worker 1 said why before closing (an ERROR frame): it was not a parameter-server failure.
  expect_error([&] { testing::train(sync0, model0, 0, 1, 1); }, ErrorCode::kPeerLost,
               {"worker 1", "was lost", "stopped in the middle of the job"});
  EXPECT_LT(seconds_since(start), 10);  // at once, not after the 20 s timeout
}

// A worker whose step failed tells the servers it can still reach what failed, so that the other
// workers (whose own links may all be fine) report the root cause — here, a second server that
// cannot be reached — rather than only "worker 0 was lost".
TEST(PsErrors, WorkerThatGivesUpTellsTheServersWhy) {
  Servers live(1, "s");
  std::string dead;
  {
    Servers gone(1, "s");  // a port that was just free and is closed again
    dead = gone.addresses[0];
  }
  Servers both(0, "s");
  both.addresses = {live.addresses[0], dead};
  PsSyncOptions options = testing::worker_options(both, 0, 1, ShardPolicy::kRoundRobin, false, "s");
  options.timeout = milliseconds(1000);
  {
    ToyModel model(kCounts, 0);
    PsSync sync(options);
    expect_error([&] { sync.initialize(model.views); }, ErrorCode::kTimeout,
                 {"parameter server 1 (" + dead + ")"});
  }  // registered with server 0, then gave up
  expect_error([&] { live.servers[0]->wait_until_done(milliseconds(10000)); }, ErrorCode::kPeerLost,
               {"worker 0 was lost", "worker 0 gave up", "parameter server 1 (" + dead + ")"});
}

TEST(PsErrors, StuckWorkerTimesOutNamingTheMissingWorker) {
  Servers servers(1, "s", milliseconds(1000));
  ToyModel model0(kCounts, 0);
  ToyModel model1(kCounts, 1);
  PsSync sync0(testing::worker_options(servers, 0, 2, ShardPolicy::kRoundRobin, false, "s"));
  PsSync sync1(testing::worker_options(servers, 1, 2, ShardPolicy::kRoundRobin, false, "s"));
  sync0.initialize(model0.views);
  sync1.initialize(model1.views);  // ... and then never pushes
  const auto start = std::chrono::steady_clock::now();
  expect_error([&] { testing::train(sync0, model0, 0, 0, 1); }, ErrorCode::kTimeout,
               {"step 0", "worker(s) 1", "layer"});
  EXPECT_LT(seconds_since(start), 10);
}

// A step that takes longer than a worker's timeout to collect (here: worker 1 pushes 2.5 s late,
// over a slow shared link: its gradients still arriving) is not a failure: the server's WAITING
// notices, at most 1 s apart, keep worker 0's wait for the reply alive; the server itself gives
// up only after its own timeout of silence (the test above).
TEST(PsErrors, SlowStepIsWaitedForThroughWaitingNotices) {
  Servers servers(1, "s", milliseconds(3000));
  ToyModel model0(kCounts, 0);
  ToyModel model1(kCounts, 1);
  PsSyncOptions options0 =
      testing::worker_options(servers, 0, 2, ShardPolicy::kRoundRobin, false, "s");
  PsSyncOptions options1 =
      testing::worker_options(servers, 1, 2, ShardPolicy::kRoundRobin, false, "s");
  options0.timeout = milliseconds(1500);  // shorter than the step takes to complete
  options1.timeout = milliseconds(1500);
  PsSync sync0(options0);
  PsSync sync1(options1);
  std::thread worker1([&] {
    sync1.initialize(model1.views);
    std::this_thread::sleep_for(milliseconds(2500));
    testing::train(sync1, model1, 1, 0, 1);
  });
  sync0.initialize(model0.views);
  const auto start = std::chrono::steady_clock::now();
  testing::train(sync0, model0, 0, 0, 1);  // would time out at 1.5 s without the notices
  worker1.join();
  EXPECT_GT(seconds_since(start), 2.0);
  EXPECT_EQ(model0.values, model1.values);
}

TEST(PsErrors, WorkerWithAnotherModelIsRejected) {
  Servers servers(1, "s");
  ToyModel model0(kCounts, 0);
  PsSync sync0(testing::worker_options(servers, 0, 2, ShardPolicy::kRoundRobin, false, "s"));
  sync0.initialize(model0.views);
  ToyModel other({40, 6, 12}, 1);
  PsSync sync1(testing::worker_options(servers, 1, 2, ShardPolicy::kRoundRobin, false, "s"));
  expect_error([&] { sync1.initialize(other.views); }, ErrorCode::kMismatch,
               {"worker 1", "tensor 1 'layer1/w' of 6 elements", "of 5"});
}

TEST(PsErrors, WorkersDisagreeingOnSharding) {
  Servers servers(1, "s");
  ToyModel model0(kCounts, 0);
  PsSync sync0(testing::worker_options(servers, 0, 2, ShardPolicy::kRoundRobin, false, "s"));
  sync0.initialize(model0.views);
  ToyModel model1(kCounts, 1);
  PsSync sync1(testing::worker_options(servers, 1, 2, ShardPolicy::kGreedyBySize, false, "s"));
  expect_error([&] { sync1.initialize(model1.views); }, ErrorCode::kMismatch,
               {"sharding greedy", "round-robin"});
}

void send_raw(int fd, const std::vector<uint8_t>& bytes) {
  int error = 0;
  ASSERT_EQ(net::send_all(fd, bytes.data(), bytes.size(),
                          net::Clock::now() + std::chrono::seconds(5), &error),
            net::IoStatus::kOk);
}

TEST(PsErrors, ServerRejectsForeignAndTruncatedMessagesAndKeepsServing) {
  Servers servers(1, "s");
  {
    // Garbage: the server answers with an ERROR frame saying what it got, then closes.
    Connection connection(testing::raw_client(servers.addresses[0], "s"), "the server",
                          milliseconds(5000));
    send_raw(connection.fd(), std::vector<uint8_t>(64, 'x'));
    Header reply;
    ASSERT_TRUE(connection.receive_header(&reply, false, -1, nullptr, "the reply"));
    EXPECT_EQ(reply.type(), ERROR);
    EXPECT_EQ(reply.error_code(), static_cast<uint32_t>(ErrorCode::kProtocol));
    EXPECT_NE(reply.error().find("not a ringd parameter-server message"), std::string::npos)
        << reply.error();
  }
  {
    // A frame claiming a 1 GiB header.
    Connection connection(testing::raw_client(servers.addresses[0], "s"), "the server",
                          milliseconds(5000));
    std::vector<uint8_t> prefix = {'R', 'N', 'P', 'S',  kVersion, 0, 0, 0,
                                   0,   0,   0,   0x40, 0,        0, 0, 0};
    send_raw(connection.fd(), prefix);
    Header reply;
    ASSERT_TRUE(connection.receive_header(&reply, false, -1, nullptr, "the reply"));
    EXPECT_EQ(reply.type(), ERROR);
    EXPECT_NE(reply.error().find("malformed frame"), std::string::npos) << reply.error();
  }
  {
    // A truncated frame: half a header, then the connection closes.
    net::Fd socket = testing::raw_client(servers.addresses[0], "s");
    send_raw(socket.get(),
             {'R', 'N', 'P', 'S', kVersion, 0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3});
  }
  // None of that was a registered worker, so the job is unaffected: real workers train.
  testing::run_workers(2, [&](int rank) {
    ToyModel model(kCounts, rank);
    PsSync sync(testing::worker_options(servers, rank, 2, ShardPolicy::kRoundRobin, false, "s"));
    sync.initialize(model.views);
    testing::train(sync, model, rank, 0, 2);
  });
  servers.servers[0]->wait_until_done();
}

// The worker's side of the same checks, on a socket pair.
TEST(PsFrame, RejectsForeignTruncatedAndMissizedFrames) {
  auto pair = [] {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    net::set_nonblocking(fds[0]);
    net::set_nonblocking(fds[1]);
    return std::make_pair(net::Fd(fds[0]), net::Fd(fds[1]));
  };
  {
    auto [ours, theirs] = pair();
    Connection connection(std::move(ours), "parameter server 3 (test)", milliseconds(2000));
    send_raw(theirs.get(),
             {'H', 'T', 'T', 'P', '/', '1', '.', '1', ' ', '2', '0', '0', ' ', 'O', 'K', '\n'});
    Header header;
    expect_error([&] { connection.receive_header(&header, false, -1, nullptr, "a pull"); },
                 ErrorCode::kProtocol,
                 {"parameter server 3 (test)", "not a ringd parameter-server message", "a pull"});
  }
  {
    auto [ours, theirs] = pair();
    Connection sender(std::move(theirs), "worker", milliseconds(2000));
    Connection connection(std::move(ours), "parameter server 3 (test)", milliseconds(2000));
    const std::vector<float> values(100, 1.0f);
    Header header;
    header.set_type(VALUES);
    sender.send(header, {{values.data(), 40}}, "test");  // announces 40 bytes
    Header got;
    ASSERT_TRUE(connection.receive_header(&got, false, -1, nullptr, "a pull"));
    expect_error([&] { connection.expect_payload(400, "a pull"); }, ErrorCode::kProtocol,
                 {"announced 40 payload bytes", "expected 400"});
  }
  {
    auto [ours, theirs] = pair();
    Connection connection(std::move(ours), "parameter server 3 (test)", milliseconds(2000));
    Header header;
    header.set_type(VALUES);
    header.set_payload_bytes(400);
    const std::string encoded = header.SerializeAsString();
    std::vector<uint8_t> frame = {'R',
                                  'N',
                                  'P',
                                  'S',
                                  static_cast<uint8_t>(kFrameVersion),
                                  0,
                                  0,
                                  0,
                                  static_cast<uint8_t>(encoded.size()),
                                  0,
                                  0,
                                  0,
                                  0,
                                  0,
                                  0,
                                  0};
    frame.insert(frame.end(), encoded.begin(), encoded.end());
    frame.insert(frame.end(), 100, 0);  // 100 of the 400 payload bytes
    send_raw(theirs.get(), frame);
    theirs.reset();
    Header got;
    ASSERT_TRUE(connection.receive_header(&got, false, -1, nullptr, "a pull"));
    connection.expect_payload(400, "a pull");
    std::vector<float> into(100);
    expect_error([&] { connection.receive_payload(into.data(), 400, "a pull"); },
                 ErrorCode::kProtocol, {"truncated", "parameter server 3 (test)"});
  }
  {  // an older ringd (v1 had no WAITING notice) is told apart, not misread
    auto [ours, theirs] = pair();
    Connection connection(std::move(ours), "parameter server 3 (test)", milliseconds(2000));
    const std::string encoded = Header().SerializeAsString();
    std::vector<uint8_t> frame = {
        'R', 'N', 'P', 'S', 1, 0, 0, 0, static_cast<uint8_t>(encoded.size()), 0, 0, 0, 0, 0, 0, 0};
    frame.insert(frame.end(), encoded.begin(), encoded.end());
    send_raw(theirs.get(), frame);
    Header got;
    expect_error([&] { connection.receive_header(&got, false, -1, nullptr, "a pull"); },
                 ErrorCode::kProtocol, {"protocol v1, this is v2", "parameter server 3 (test)"});
  }
  {
    auto [ours, theirs] = pair();
    Connection connection(std::move(ours), "parameter server 3 (test)", milliseconds(300));
    Header got;
    expect_error([&] { connection.receive_header(&got, false, -1, nullptr, "a pull"); },
                 ErrorCode::kTimeout, {"parameter server 3 (test)", "did not answer"});
  }
}

}  // namespace
}  // namespace ringd::ps
