// ShardStore without sockets: synchronous aggregation is the mean in worker-rank order whatever
// order the pushes arrive in (bitwise), one step at a time; out-of-step, duplicate and foreign
// pushes are refused naming worker, tensor and steps; a pull waits for the step; the end wait
// gives up on a worker that never came; asynchronous pushes apply at once.
#include "ps/shard_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <thread>

#include "ringd/error.h"

namespace ringd::ps {
namespace {

using std::chrono::milliseconds;

JobDescription job(int rank, int workers, bool asynchronous) {
  JobDescription description;
  description.set_worker_rank(rank);
  description.set_workers(workers);
  description.set_server_index(0);
  description.set_servers(1);
  description.set_asynchronous(asynchronous);
  description.set_momentum(0);
  for (auto [name, count] : {std::pair<const char*, size_t>{"a", 3}, {"b", 2}}) {
    TensorInfo* tensor = description.add_tensors();
    tensor->set_name(name);
    tensor->set_count(count);
  }
  return description;
}

void initialize(ShardStore& store) {
  for (size_t index : {size_t{0}, size_t{1}}) {
    float* into = store.begin_init(0, index);
    std::fill(into, into + store.count_of(index), 1.0f);
    store.init_done(index);
  }
}

void push(ShardStore& store, int rank, size_t index, int64_t step, const std::vector<float>& grad,
          double lr = 1.0) {
  float* slot = store.begin_push(rank, index, step);
  ASSERT_NE(slot, nullptr);
  std::memcpy(slot, grad.data(), grad.size() * sizeof(float));
  store.push_done(rank, index, step, lr);
}

template <typename Body>
std::string error_of(Body body, ErrorCode code) {
  try {
    body();
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), code) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(ShardStore, MeanIsSummedInRankOrderWhateverTheArrivalOrder) {
  // Values whose float sum depends on the order: 1e8 + 1 - 1e8 is 0 left to right but 1 as
  // (1e8 - 1e8) + 1. Rank order (w0 + w1 + w2) must be what is applied, for every arrival order.
  const std::vector<std::vector<float>> grads = {{1e8f, 0, 0}, {1.0f, 0, 0}, {-1e8f, 0, 0}};
  const float expected_mean = ((1e8f + 1.0f) + -1e8f) * (1.0f / 3.0f);
  std::vector<int> order = {0, 1, 2};
  do {
    ShardStore store("server");
    for (int rank = 0; rank < 3; ++rank) store.register_worker(job(rank, 3, false), "test");
    initialize(store);
    for (int rank : order) push(store, rank, 0, 0, grads[static_cast<size_t>(rank)]);
    for (int rank : order) push(store, rank, 1, 0, {0, 0});
    std::vector<const float*> values;
    std::vector<std::vector<float>> scratch;
    store.pull(0, milliseconds(1000), &values, &scratch);
    EXPECT_EQ(values[0][0], 1.0f - expected_mean) << order[0] << order[1] << order[2];
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(ShardStore, RefusesOutOfStepDuplicateAndForeignPushes) {
  ShardStore store("server X");
  store.register_worker(job(0, 2, false), "test");
  store.register_worker(job(1, 2, false), "test");
  initialize(store);
  push(store, 0, 0, 5, {1, 1, 1});  // the first step may be any (a resumed job)
  std::string text = error_of([&] { store.begin_push(0, 0, 5); }, ErrorCode::kMismatch);
  EXPECT_NE(text.find("worker 0 pushed 'a' twice for step 5"), std::string::npos) << text;
  text = error_of([&] { store.begin_push(1, 0, 6); }, ErrorCode::kMismatch);
  EXPECT_NE(text.find("step 6 while step 5 is being gathered"), std::string::npos) << text;
  push(store, 1, 0, 5, {1, 1, 1});
  EXPECT_EQ(store.applied_step(0), 5);
  text = error_of([&] { store.begin_push(1, 0, 7); }, ErrorCode::kMismatch);
  EXPECT_NE(text.find("step 5 was the last applied"), std::string::npos) << text;
  text = error_of([&] { store.begin_push(0, 9, 6); }, ErrorCode::kMismatch);
  EXPECT_NE(text.find("tensor #9"), std::string::npos) << text;
  text = error_of([&] { store.begin_init(1, 0); }, ErrorCode::kProtocol);
  EXPECT_NE(text.find("only worker 0"), std::string::npos) << text;
  text = error_of([&] { store.register_worker(job(1, 2, false), "again"); }, ErrorCode::kMismatch);
  EXPECT_NE(text.find("registered twice"), std::string::npos) << text;
}

TEST(ShardStore, PullWaitsForTheStepAndTimesOutNamingMissingWorkers) {
  ShardStore store("server");
  for (int rank = 0; rank < 3; ++rank) store.register_worker(job(rank, 3, false), "test");
  initialize(store);
  push(store, 0, 0, 0, {1, 2, 3});
  push(store, 2, 0, 0, {1, 2, 3});
  std::vector<const float*> values;
  std::vector<std::vector<float>> scratch;
  const std::string text =
      error_of([&] { store.pull(0, milliseconds(100), &values, &scratch); }, ErrorCode::kTimeout);
  EXPECT_NE(text.find("'a' still lacks the step 0 gradients of worker(s) 1"), std::string::npos)
      << text;
  // Completed from another thread while a pull waits.
  std::thread late([&] {
    push(store, 1, 0, 0, {1, 2, 3});
    for (int rank = 0; rank < 3; ++rank) push(store, rank, 1, 0, {0, 0});
  });
  store.pull(0, milliseconds(10000), &values, &scratch);
  late.join();
  EXPECT_EQ(values[0][1], 1.0f - 2.0f);  // lr 1, momentum 0: w - mean
}

// The pull's limit is on silence: bytes arriving (note_activity) for longer than the timeout keep
// it waiting, and meanwhile it calls `waiting` (the server sends WAITING notices from there).
TEST(ShardStore, PullWaitsAsLongAsSomethingArrivesAndSaysSoMeanwhile) {
  ShardStore store("server");
  for (int rank = 0; rank < 2; ++rank) store.register_worker(job(rank, 2, false), "test");
  initialize(store);
  push(store, 0, 0, 0, {1, 2, 3});
  push(store, 0, 1, 0, {1, 1});
  std::thread slow([&] {  // worker 1's gradients trickle in for 3 x the timeout
    for (int piece = 0; piece < 9; ++piece) {
      std::this_thread::sleep_for(milliseconds(100));
      store.note_activity();
    }
    push(store, 1, 0, 0, {1, 2, 3});
    push(store, 1, 1, 0, {1, 1});
  });
  std::vector<const float*> values;
  std::vector<std::vector<float>> scratch;
  int notices = 0;
  store.pull(0, milliseconds(300), &values, &scratch, [&] { ++notices; });
  slow.join();
  EXPECT_GE(notices, 3);  // every <= 100 ms (timeout / 3) over ~900 ms
  EXPECT_EQ(values[0][1], 1.0f - 2.0f);
}

TEST(ShardStore, LostWorkerFailsWaitingPulls) {
  ShardStore store("server");
  store.register_worker(job(0, 2, false), "test");
  store.register_worker(job(1, 2, false), "test");
  initialize(store);
  std::thread loss([&] { store.worker_lost(1, "worker 1 (10.0.0.9:5) closed its connection"); });
  std::vector<const float*> values;
  std::vector<std::vector<float>> scratch;
  const std::string text = error_of([&] { store.pull(0, milliseconds(20000), &values, &scratch); },
                                    ErrorCode::kPeerLost);
  loss.join();
  EXPECT_NE(text.find("worker 1 was lost: worker 1 (10.0.0.9:5)"), std::string::npos) << text;
  EXPECT_THROW(store.wait_until_done(), Error);
}

TEST(ShardStore, EndWaitGivesUpOnAWorkerThatNeverCame) {
  ShardStore store("server");
  store.register_worker(job(0, 3, false), "test");
  store.register_worker(job(2, 3, false), "test");
  EXPECT_FALSE(store.worker_left(0));
  const auto start = std::chrono::steady_clock::now();
  const std::string text =
      error_of([&] { store.wait_until_done(milliseconds(200)); }, ErrorCode::kTimeout);
  EXPECT_NE(text.find("still waiting for worker(s) 1 (never registered), 2"), std::string::npos)
      << text;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(ShardStore, AsynchronousPushesApplyAtOnce) {
  ShardStore store("server");
  store.register_worker(job(0, 2, true), "test");
  store.register_worker(job(1, 2, true), "test");
  initialize(store);
  EXPECT_EQ(store.begin_push(1, 0, 0), nullptr);
  const std::vector<float> grad = {0.5f, 0.25f, 0};
  store.apply_async(0, grad.data(), 1.0);
  std::vector<const float*> values;
  std::vector<std::vector<float>> scratch;
  store.pull(0, milliseconds(100), &values, &scratch);  // no waiting for worker 0
  EXPECT_EQ(values[0][0], 0.5f);
  EXPECT_EQ(values[0][1], 0.75f);
  EXPECT_EQ(values[0][2], 1.0f);
  EXPECT_FALSE(store.worker_left(0));
  EXPECT_TRUE(store.worker_left(1));
  store.wait_until_done();
}

}  // namespace
}  // namespace ringd::ps
