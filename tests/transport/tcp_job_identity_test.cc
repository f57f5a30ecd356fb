// Issue 15, item 9: job identity. A process that claims a rank already held is refused naming the
// holder, and every rank of the job fails naming both claimants; a HELLO of another job is refused;
// two jobs started together on one store never complete with each other's ranks.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>

#include "net/handshake.h"
#include "net/socket.h"
#include "ringd/collectives.h"
#include "transport/tcp_test_support.h"

namespace ringd {
namespace {

using std::chrono::milliseconds;
using testing::expect_error;
using testing::in;
using testing::loopback_options;
using testing::run_ranks;

// One round: every rank sends `value` to every peer and returns what each peer sent.
std::vector<int> exchange(Context& ctx, int value, int round) {
  std::vector<int> got(ctx.size(), value);
  std::vector<RequestPtr> pending;
  for (int peer = 0; peer < ctx.size(); ++peer) {
    if (peer == ctx.rank()) continue;
    pending.push_back(ctx.pair(peer).irecv(&got[peer], sizeof(int), round));
    pending.push_back(ctx.pair(peer).isend(&value, sizeof(int), round));
  }
  for (auto& completion : pending) completion->wait(milliseconds(5000));
  return got;
}

// The stray claims rank 1 first and the job forms with it; then the real rank 1 starts. It is
// refused naming the stray, and every rank of the running job (the stray included) fails naming
// the two claims (before: all four completed, having averaged the stray's data). The ranks run
// allreduces, as a job does: a rank whose first news of the conflict is a peer's abort passes it
// on to its other peers (raw pair exchanges do not, and a rank that had not yet had its own
// notice then saw only that peer's EOF: 2-5 runs in 60 on a 2-core host).
TEST(TcpJobIdentity, AStrayClaimantOfARankFailsEveryRank) {
  MemoryStore store;
  ::testing::internal::CaptureStderr();
  std::vector<std::string> errors(4);
  std::promise<void> formed;
  std::atomic<int> connected{0};
  std::string refused;
  std::thread real_rank1([&] {
    formed.get_future().wait();
    refused = expect_error([&] { tcp_connect(store, 1, 4, loopback_options()); }).what();
  });
  run_ranks(4, [&](int rank) {
    if (rank != 1) store.get("ringd/rank/1", milliseconds(10000));  // the stray was first
    auto ctx = tcp_connect(store, rank, 4, loopback_options());
    if (++connected == 4) formed.set_value();
    try {
      int sum = 0;
      for (int round = 0; round < 1000000; ++round) {
        allreduce(*ctx, &rank, &sum, 1, DataType::kInt32, ReduceOp::kSum);
        ASSERT_EQ(sum, 6);
      }
    } catch (const Error& e) {
      errors[rank] = e.what();
    }
  });
  real_rank1.join();
  ::testing::internal::GetCapturedStderr();
  RINGD_EXPECT_CONTAINS(refused, "rank 1: rank 1 of job ");
  RINGD_EXPECT_CONTAINS(refused, " was already claimed by pid ");
  RINGD_EXPECT_CONTAINS(refused, "two processes were started as rank 1");
  for (int rank = 0; rank < 4; ++rank) {
    RINGD_EXPECT_CONTAINS(errors[rank], "was claimed by two processes");
  }
}

// Two processes claim rank 1 while rank 0 waits for its mesh: the second is refused, and rank 0
// and the first claimant fail too, naming the conflict, instead of forming a job.
TEST(TcpJobIdentity, ASecondClaimWhileTheJobFormsFailsEveryRank) {
  MemoryStore store;
  ::testing::internal::CaptureStderr();
  std::vector<std::string> errors(3);
  run_ranks(3, [&](int thread) {
    const int rank = thread == 0 ? 0 : 1;
    if (thread == 2) store.get("ringd/rank/1", milliseconds(10000));
    errors[thread] = expect_error([&] {
                       auto ctx = tcp_connect(store, rank, 2, loopback_options(milliseconds(5000)));
                       for (int round = 0; round < 1000000; ++round) exchange(*ctx, rank, round);
                     }).what();
  });
  ::testing::internal::GetCapturedStderr();
  RINGD_EXPECT_CONTAINS(errors[2], "was already claimed by pid ");
  RINGD_EXPECT_CONTAINS(errors[0], "was claimed");
  RINGD_EXPECT_CONTAINS(errors[1], "was claimed");
}

// A HELLO carrying another job's id is refused by the rank, naming both jobs.
TEST(TcpJobIdentity, AHelloOfAnotherJobIsRefused) {
  MemoryStore store;
  auto contexts = testing::connect_ranks(2, store);
  const std::string address = to_string(store.get("tcp/0", milliseconds(1000)));
  int error = 0;
  net::Fd socket =
      net::connect_to(net::parse_endpoint(address, "test"), {}, in(milliseconds(5000)), &error);
  ASSERT_TRUE(socket.valid());
  net::HelloInfo hello;
  hello.rank = 1;
  hello.target_rank = 0;
  hello.world_size = 2;
  hello.job_id = std::string(32, 'a');
  ::testing::internal::CaptureStderr();
  const Error refused = expect_error([&] {
    net::dial_handshake(socket.get(), "test-secret", hello, 0, "rank 1 of job aaaa", "rank 0",
                        in(milliseconds(5000)));
  });
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(refused.code(), ErrorCode::kMismatch) << refused.what();
  RINGD_EXPECT_CONTAINS(refused.what(), "the dialer belongs to job " + std::string(32, 'a'));
  // The job is unharmed.
  run_ranks(2,
            [&](int rank) { EXPECT_EQ(exchange(*contexts[rank], rank, 1)[1 - rank], 1 - rank); });
}

// Two jobs of 3 ranks on one store (one --rendezvous, no job id): 6 processes for 3 ranks, each
// rank with one winner and one refused claimant. `winners_first`: job 0's ranks 0 and 2 and job 1's
// rank 1 form a mixed job before the other three start; else all six start at once. A refused
// claimant's notices are answered only once the rank they reach has failed, so once every process
// has claimed its rank no rank completes and none ever sees the other job's data. The exchanges
// wait for the last claim: a claimant that starts after a job has run, or finished, cannot be told
// from a restarted rank by a store without a job id (docs/security.md).
void two_jobs_on_one_store(bool winners_first) {
  for (int trial = 0; trial < 5; ++trial) {
    MemoryStore store;
    ::testing::internal::CaptureStderr();
    std::vector<int> completed(6, 0);
    std::vector<std::string> errors(6);
    std::latch formed(3);
    std::latch claimed(6);
    run_ranks(6, [&](int process) {
      const int job = process / 3, rank = process % 3;
      const bool winner = (job == 0) == (rank != 1);
      if (winners_first && !winner) formed.wait();
      std::unique_ptr<Context> ctx;
      try {
        ctx = tcp_connect(store, rank, 3, loopback_options(milliseconds(3000)));
      } catch (const Error& e) {
        errors[process] = e.what();
      }
      if (winners_first && winner) formed.count_down();
      if (!ctx) {
        claimed.count_down();
        return;
      }
      claimed.arrive_and_wait();
      try {
        for (int round = 0; round < 200; ++round) {
          for (int value : exchange(*ctx, job, round)) {
            ASSERT_EQ(value, job) << "trial " << trial << ": job " << job << " rank " << rank
                                  << " got data of the other job";
          }
        }
        completed[process] = 1;
      } catch (const Error& e) {
        errors[process] = e.what();
      }
    });
    ::testing::internal::GetCapturedStderr();
    int refused = 0;
    for (int process = 0; process < 6; ++process) {
      EXPECT_EQ(completed[process], 0) << "trial " << trial << ": process " << process;
      RINGD_EXPECT_CONTAINS(errors[process], "claimed")
          << "\ntrial " << trial << ", process " << process;
      refused += errors[process].find("was already claimed by pid ") != std::string::npos;
    }
    EXPECT_EQ(refused, 3) << "trial " << trial << ": one claimant of each rank is refused";
  }
}

TEST(TcpJobIdentity, TwoJobsStartedAtOnceOnOneStoreNeverMix) { two_jobs_on_one_store(false); }

TEST(TcpJobIdentity, TheLateHalfOfTwoJobsFailsTheMixedJobThatFormed) {
  two_jobs_on_one_store(true);
}

}  // namespace
}  // namespace ringd
