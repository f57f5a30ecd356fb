// Elastic membership (rendezvous/elastic_membership.h) over a memory store and the TCP store: the
// processes of a job agree on each generation, its ranks and who holds the newest state; a
// generation closes at max_ranks at once, or at min_ranks after the settle time; a late claimant
// and a newcomer wait for the next generation, which never closes while the one before runs;
// too few processes is a named timeout.
#include "rendezvous/elastic_membership.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "ringd/error.h"
#include "testing/store_ref.h"

namespace ringd::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

ElasticBounds bounds(int min_ranks, int max_ranks, int settle_ms = 200, int timeout_ms = 10000) {
  ElasticBounds b;
  b.min_ranks = min_ranks;
  b.max_ranks = max_ranks;
  b.settle = milliseconds(settle_ms);
  b.timeout = milliseconds(timeout_ms);
  return b;
}

ElasticMember member(const std::string& name, int64_t step) {
  return ElasticMember{new_member_id(), step, name};
}

// Each of `members` joins from generation `from` on its own thread (its own store client, when
// the store has clients); returns what each got, or rethrows the first error.
std::vector<Generation> join_all(const std::function<std::unique_ptr<Store>()>& client,
                                 const std::string& job, const ElasticBounds& b,
                                 const std::vector<ElasticMember>& members, int64_t from) {
  std::vector<Generation> got(members.size());
  std::vector<std::exception_ptr> errors(members.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < members.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        std::unique_ptr<Store> store = client();
        ElasticMembership membership(*store, job, b);
        got[i] = membership.join(members[i], from);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return got;
}

using testing::StoreRef;

// The checks every generation must pass: one number, ranks 0..n-1 each held once, everyone the
// same list.
void expect_one_generation(const std::vector<Generation>& got, int64_t number, int size) {
  std::set<int> ranks;
  for (const Generation& g : got) {
    EXPECT_EQ(g.number, number);
    ASSERT_EQ(g.size(), size);
    ranks.insert(g.rank);
    for (int r = 0; r < size; ++r) EXPECT_EQ(g.members[r].id, got[0].members[r].id);
    EXPECT_EQ(g.members[g.rank].who.empty(), false);
  }
  EXPECT_EQ(static_cast<int>(ranks.size()), size);
}

TEST(ElasticMembershipTest, FourProcessesFormOneGenerationAtOnceAtMaxRanks) {
  MemoryStore store;
  const auto start = Clock::now();
  const std::vector<Generation> got = join_all(
      [&] { return std::make_unique<StoreRef>(store); }, "job-a", bounds(2, 4, /*settle_ms=*/5000),
      {member("a", -1), member("b", -1), member("c", -1), member("d", -1)}, 0);
  expect_one_generation(got, 0, 4);
  EXPECT_LT(Clock::now() - start, milliseconds(4000)) << "max_ranks closes without the settle";
}

TEST(ElasticMembershipTest, RankZeroHoldsTheNewestStateThenSlotOrder) {
  MemoryStore store;
  ElasticMembership membership(store, "job-b", bounds(3, 3));
  // Claims in this order (each its own thread, started one after the other).
  const std::vector<ElasticMember> members = {member("old", 40), member("newest", 50),
                                              member("newcomer", -1)};
  std::vector<Generation> got(3);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < members.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = membership.join(members[i], 0); });
    std::this_thread::sleep_for(milliseconds(50));
  }
  for (std::thread& t : threads) t.join();
  expect_one_generation(got, 0, 3);
  EXPECT_EQ(got[0].members[0].who, "newest");
  EXPECT_EQ(got[0].members[0].step, 50);
  EXPECT_EQ(got[0].members[1].who, "old");
  EXPECT_EQ(got[0].members[2].who, "newcomer");
  EXPECT_EQ(got[2].members[2].step, -1);
}

TEST(ElasticMembershipTest, MinRanksCloseAfterTheSettleTime) {
  MemoryStore store;
  const auto start = Clock::now();
  const std::vector<Generation> got = join_all([&] { return std::make_unique<StoreRef>(store); },
                                               "job-c", bounds(2, 8, /*settle_ms=*/300),
                                               {member("a", 0), member("b", 0), member("c", 0)}, 0);
  expect_one_generation(got, 0, 3);
  EXPECT_GE(Clock::now() - start, milliseconds(300));
}

TEST(ElasticMembershipTest, TooFewProcessesIsATimeoutNamingThem) {
  MemoryStore store;
  ElasticMembership membership(store, "job-d", bounds(3, 4, 100, 600));
  try {
    membership.join(member("lonely (pid 7)", 12), 0);
    FAIL() << "joined alone with --min-ranks 3";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("generation 0 has 1 of --min-ranks 3"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("lonely (pid 7)"), std::string::npos) << e.what();
  }
}

TEST(ElasticMembershipTest, SurvivorsEndTheirGenerationAndFormTheNextAmongThemselves) {
  MemoryStore store;
  auto client = [&] { return std::make_unique<StoreRef>(store); };
  std::vector<ElasticMember> four = {member("a", -1), member("b", -1), member("c", -1),
                                     member("d", -1)};
  const std::vector<Generation> first = join_all(client, "job-e", bounds(2, 4), four, 0);
  expect_one_generation(first, 0, 4);
  ElasticMembership membership(store, "job-e", bounds(2, 4));
  EXPECT_EQ(membership.ended(0), "");
  // The process of rank 2 is lost at step 51: every survivor reports it, the first word stays.
  std::vector<ElasticMember> survivors;
  for (const Generation& g : first) {
    const ElasticMember& self = g.members[g.rank];
    if (g.rank == 2) continue;
    EXPECT_EQ(membership.end(0, "rank 2 lost at step 51 (seen by " + self.who + ")")
                  .rfind("rank 2 lost at step 51", 0),
              0u);
    survivors.push_back(ElasticMember{self.id, 51, self.who});
  }
  EXPECT_EQ(membership.ended(0).rfind("rank 2 lost at step 51", 0), 0u);
  const std::vector<Generation> second = join_all(client, "job-e", bounds(2, 4), survivors, 0);
  expect_one_generation(second, 1, 3);
  EXPECT_FALSE(membership.newcomer_waiting(1));
}

TEST(ElasticMembershipTest, ANewcomerWaitsUntilTheRunningGenerationEndsThenTheJobGrows) {
  MemoryStore store;
  auto client = [&] { return std::make_unique<StoreRef>(store); };
  const ElasticBounds b = bounds(1, 4, /*settle_ms=*/100);
  std::vector<ElasticMember> two = {member("a", -1), member("b", -1)};
  const std::vector<Generation> first = join_all(client, "job-f", b, two, 0);
  expect_one_generation(first, 0, 2);

  // A process started later with the same command line: generation 0 runs, so it waits in 1,
  // and does not close generation 1 alone although min_ranks is 1.
  ElasticMembership running(store, "job-f", b);
  Generation newcomer;
  std::thread late([&] {
    ElasticMembership membership(store, "job-f", b);
    newcomer = membership.join(member("late", -1), 0);
  });
  const auto waiting_since = Clock::now();
  while (!running.newcomer_waiting(0)) {
    ASSERT_LT(Clock::now() - waiting_since, milliseconds(5000)) << "the newcomer never claimed";
    std::this_thread::sleep_for(milliseconds(10));
  }
  std::this_thread::sleep_for(milliseconds(500));  // 5 settle times
  ElasticMembership probe(store, "job-f", b);
  EXPECT_EQ(probe.ended(0), "");
  // The running ranks end generation 0 at a step boundary and join the next one.
  running.end(0, "a process waits to join");
  std::vector<ElasticMember> again;
  for (const Generation& g : first) {
    again.push_back(ElasticMember{g.members[g.rank].id, 10, g.members[g.rank].who});
  }
  std::vector<Generation> second = join_all(client, "job-f", b, again, 1);
  late.join();
  second.push_back(newcomer);
  expect_one_generation(second, 1, 3);
  EXPECT_EQ(newcomer.members[newcomer.rank].step, -1);
  EXPECT_EQ(newcomer.rank, 2) << "the newcomer holds no state: it is not rank 0";
}

TEST(ElasticMembershipTest, ConcurrentClaimantsOverTheTcpStoreAgreeOnEachList) {
  // 5 processes at once, max 4: 4 form generation 0 at once, the fifth waits in generation 1.
  // Generation 0's ranks end it when they see the newcomer; its rank 3 is lost meanwhile, and the
  // other three with the newcomer make generation 1 (4 = max: at once).
  TcpStoreServer server("127.0.0.1", 0);
  const uint16_t port = server.port();
  const ElasticBounds b = bounds(2, 4, 200, 20000);
  std::vector<ElasticMember> five;
  for (int i = 0; i < 5; ++i) five.push_back(member("p" + std::to_string(i), -1));
  std::vector<Generation> first(5), second(5);
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&, i] {
      TcpStore store("127.0.0.1", port);
      ElasticMembership membership(store, "job-g", b);
      first[i] = membership.join(five[i], 0);
      if (first[i].number != 0) {
        second[i] = first[i];
        return;
      }
      while (!membership.newcomer_waiting(0)) std::this_thread::sleep_for(milliseconds(10));
      membership.end(0, "a process waits to join");
      if (first[i].rank == 3) return;  // lost
      second[i] = membership.join(five[i], 1);
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<Generation> zero, one;
  for (int i = 0; i < 5; ++i) {
    if (first[i].number == 0) zero.push_back(first[i]);
    if (first[i].number != 0 || first[i].rank != 3) one.push_back(second[i]);
  }
  expect_one_generation(zero, 0, 4);
  expect_one_generation(one, 1, 4);
}

TEST(ElasticMembershipTest, AProcessArrivingAfterTheJobFinishedIsToldSo) {
  // Not a job of its own from nothing: the job's record says it is done.
  MemoryStore store;
  ElasticMembership membership(store, "job-h", bounds(1, 2));
  const Generation g = membership.join(member("a", -1), 0);
  membership.finish(g.number, "finished training after step 40");
  EXPECT_EQ(membership.ended(g.number), "finished training after step 40");
  try {
    membership.join(member("late", -1), 0);
    FAIL() << "joined a finished job";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("has finished training (generation 0: finished training "
                                         "after step 40): there is nothing to join"),
              std::string::npos)
        << e.what();
  }
}

TEST(ElasticMembershipTest, GenerationJobIdsDifferPerGenerationAndJob) {
  EXPECT_EQ(generation_job_id("job", 3), generation_job_id("job", 3));
  EXPECT_NE(generation_job_id("job", 3), generation_job_id("job", 4));
  EXPECT_NE(generation_job_id("job", 3), generation_job_id("other", 3));
  EXPECT_EQ(generation_job_id("job", 0).size(), 32u);
}

TEST(ElasticMembershipTest, BadBoundsAndIdsAreRefused) {
  MemoryStore store;
  EXPECT_THROW(ElasticMembership(store, "job", bounds(0, 4)), Error);
  EXPECT_THROW(ElasticMembership(store, "job", bounds(3, 2)), Error);
  EXPECT_THROW(ElasticMembership(store, "", bounds(1, 2)), Error);
  EXPECT_THROW(ElasticMembership(store, "a/b", bounds(1, 2)), Error);
  ElasticMembership membership(store, "job", bounds(1, 1));
  EXPECT_THROW(membership.join(ElasticMember{"has space", -1, "x"}, 0), Error);
}

}  // namespace
}  // namespace ringd::rendezvous
