// ElasticJob (job/elastic_job.h) over loopback tcp and a TCP rendezvous store, one thread per
// process: 4 ranks allreduce; rank 2's process is lost (its Context destroyed mid-job, as a killed
// process's sockets close); the survivors' next allreduce fails with kPeerLost, they end the
// generation and form the next one among themselves (3 ranks, the allreduce's closed form again);
// a process started later waits until the running ranks end their generation at a step boundary,
// and the job is back at 4 ranks. A rank of an old generation cannot join the new one.
#include "job/elastic_job.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ringd/collectives.h"
#include "ringd/error.h"

namespace ringd::job {
namespace {

using std::chrono::milliseconds;

ElasticJobOptions options(const std::string& who, int min_ranks, int max_ranks) {
  ElasticJobOptions o;
  o.job_id = "elastic-test";
  o.bounds.min_ranks = min_ranks;
  o.bounds.max_ranks = max_ranks;
  o.bounds.settle = milliseconds(300);
  o.bounds.timeout = milliseconds(20000);
  o.tcp.bind_address = "127.0.0.1";
  o.tcp.secret = "elastic-test-secret";
  o.tcp.timeout = milliseconds(5000);
  o.who = who;
  return o;
}

// Sum over ranks of (rank + 1): n(n+1)/2 in every element.
void expect_allreduce(Context& ctx) {
  std::vector<float> data(1000, static_cast<float>(ctx.rank() + 1));
  allreduce(ctx, data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
  const float expected = static_cast<float>(ctx.size() * (ctx.size() + 1) / 2);
  for (float v : data) ASSERT_EQ(v, expected) << "rank " << ctx.rank() << " of " << ctx.size();
}

TEST(ElasticJobTest, ShrinksWhenAProcessIsLostAndGrowsBackWhenOneArrives) {
  TcpStoreServer server("127.0.0.1", 0, "elastic-test-secret");
  const uint16_t port = server.port();
  constexpr int kProcesses = 4;
  std::atomic<bool> lost_done{false};
  std::atomic<int> survivors_in_three{0};
  std::vector<std::vector<int>> sizes(kProcesses + 1);  // per process, the size of each generation
  std::vector<std::string> failures(kProcesses + 1);
  std::vector<std::thread> threads;
  for (int p = 0; p < kProcesses; ++p) {
    threads.emplace_back([&, p] {
      try {
        TcpStore store("127.0.0.1", port, "elastic-test-secret");
        ElasticJob job(store, options("process " + std::to_string(p), 2, 4));
        ElasticGeneration g = job.form(-1);
        sizes[p].push_back(g.size());
        expect_allreduce(*g.ctx);
        // The process holding rank 2 is lost: its connections close.
        const bool victim = g.rank() == 2;
        if (victim) {
          g.ctx.reset();
          lost_done = true;
          return;
        }
        while (!lost_done) std::this_thread::sleep_for(milliseconds(5));
        try {
          expect_allreduce(*g.ctx);
          failures[p] = "an allreduce without rank 2 did not fail";
          return;
        } catch (const Error& e) {
          if (e.code() != ErrorCode::kPeerLost && e.code() != ErrorCode::kTimeout) throw;
        }
        g.ctx.reset();
        job.end("rank 2 lost");
        g = job.form(10);
        sizes[p].push_back(g.size());
        expect_allreduce(*g.ctx);
        ++survivors_in_three;
        // Step boundaries until a newcomer waits; every rank must agree to end the generation:
        // the flag goes through an allreduce (Max) as a training step's vote would.
        for (;;) {
          float waiting = job.newcomer_waiting() ? 1.0f : 0.0f;
          allreduce(*g.ctx, &waiting, &waiting, 1, DataType::kFloat32, ReduceOp::kMax);
          if (waiting > 0) break;
          std::this_thread::sleep_for(milliseconds(20));
        }
        g.ctx.reset();
        job.end("a process waits to join");
        g = job.form(20);
        sizes[p].push_back(g.size());
        expect_allreduce(*g.ctx);
      } catch (const std::exception& e) {
        failures[p] = e.what();
      }
    });
  }
  // The newcomer: started once the survivors run as 3.
  threads.emplace_back([&] {
    try {
      while (survivors_in_three < 3) std::this_thread::sleep_for(milliseconds(5));
      TcpStore store("127.0.0.1", port, "elastic-test-secret");
      ElasticJob job(store, options("newcomer", 2, 4));
      ElasticGeneration g = job.form(-1);
      sizes[kProcesses].push_back(g.size());
      EXPECT_NE(g.rank(), 0) << "the newcomer holds no state";
      EXPECT_EQ(g.membership.number, 2);
      expect_allreduce(*g.ctx);
    } catch (const std::exception& e) {
      failures[kProcesses] = e.what();
    }
  });
  for (std::thread& t : threads) t.join();
  int victims = 0;
  for (int p = 0; p <= kProcesses; ++p) {
    EXPECT_EQ(failures[p], "") << "process " << p;
    if (p == kProcesses) continue;
    if (sizes[p] == std::vector<int>{4}) {
      ++victims;
    } else {
      EXPECT_EQ(sizes[p], (std::vector<int>{4, 3, 4})) << "process " << p;
    }
  }
  EXPECT_EQ(victims, 1);
  EXPECT_EQ(sizes[kProcesses], std::vector<int>{4});
}

TEST(ElasticJobTest, ARankOfAnOldGenerationCannotJoinTheNewOne) {
  // Two processes form generation 0, end it and form generation 1. A third process that read
  // generation 0's addresses dials with generation 0's job id: refused.
  TcpStoreServer server("127.0.0.1", 0, "elastic-test-secret");
  const uint16_t port = server.port();
  std::vector<std::unique_ptr<ElasticGeneration>> ones(2);
  std::vector<std::string> failures(2);
  std::vector<std::thread> threads;
  std::atomic<int> in_one{0};
  std::atomic<bool> checked{false};
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      try {
        TcpStore store("127.0.0.1", port, "elastic-test-secret");
        ElasticJob job(store, options("p" + std::to_string(p), 2, 2));
        ElasticGeneration g = job.form(-1);
        EXPECT_EQ(g.membership.number, 0);
        g.ctx.reset();
        job.end("test");
        ones[p] = std::make_unique<ElasticGeneration>(job.form(0));
        EXPECT_EQ(ones[p]->membership.number, 1);
        ++in_one;
        while (!checked) std::this_thread::sleep_for(milliseconds(5));
      } catch (const std::exception& e) {
        failures[p] = e.what();
      }
    });
  }
  while (in_one < 2) std::this_thread::sleep_for(milliseconds(5));
  // A straggler of generation 0 (its rank 1, come back) with generation 0's keys: the rank is
  // claimed; with generation 1's keys but generation 0's id (what its HELLOs would carry): another
  // job. Either way refused before any connection.
  TcpStore store("127.0.0.1", port, "elastic-test-secret");
  TcpOptions tcp;
  tcp.bind_address = "127.0.0.1";
  tcp.secret = "elastic-test-secret";
  tcp.timeout = milliseconds(1500);
  tcp.job_id = rendezvous::generation_job_id("elastic-test", 0);
  for (const char* generation : {"0", "1"}) {
    PrefixStore keys(std::string("ringd/elastic/elastic-test/g/") + generation + "/tcp", store);
    try {
      tcp_connect(keys, 1, 2, tcp);
      ADD_FAILURE() << "a generation-0 rank connected through generation " << generation;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kMismatch) << e.what();
    }
  }
  checked = true;
  for (std::thread& t : threads) t.join();
  for (const std::string& f : failures) EXPECT_EQ(f, "");
  // Generation 1 still works.
  std::vector<std::thread> again;
  for (int p = 0; p < 2; ++p) again.emplace_back([&, p] { expect_allreduce(*ones[p]->ctx); });
  for (std::thread& t : again) t.join();
}

}  // namespace
}  // namespace ringd::job
