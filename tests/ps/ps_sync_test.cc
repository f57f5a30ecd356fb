// PsSync against real servers on loopback: synchronous training over W workers and k servers,
// both sharding policies, equals the serial computation bit for bit after 20 steps (and every
// worker holds the same bits); asynchronous mode applies each push at once, so a worker advances
// without waiting for the others, and the updates of every worker are all applied.
#include "ps/ps_sync.h"

#include <gtest/gtest.h>

#include <cstring>

#include "ps/ps_test_support.h"
#include "ringd/error.h"

namespace ringd::ps {
namespace {

using testing::Servers;
using testing::ToyModel;

struct SyncCase {
  int workers;
  int servers;
  ShardPolicy policy;
};

class PsSyncMatchesSerial : public ::testing::TestWithParam<SyncCase> {};

TEST_P(PsSyncMatchesSerial, After20Steps) {
  const SyncCase c = GetParam();
  const std::vector<size_t> counts = {300, 20, 1, 64, 7};
  const int64_t steps = 20;
  Servers servers(c.servers, "sync-secret");
  std::vector<std::vector<std::vector<float>>> finals(static_cast<size_t>(c.workers));
  testing::run_workers(c.workers, [&](int rank) {
    ToyModel model(counts, rank);
    PsSync sync(testing::worker_options(servers, rank, c.workers, c.policy, false, "sync-secret"));
    sync.initialize(model.views);
    EXPECT_EQ(sync.server_of(), assign_shards(counts, c.servers, c.policy));
    testing::train(sync, model, rank, 0, steps);
    EXPECT_GE(sync.blocked_seconds(), 0.0);
    finals[static_cast<size_t>(rank)] = model.values;
  });
  model::SgdOptions sgd;
  sgd.momentum = 0.9;
  sgd.weight_decay = 0.01;
  const auto expected = testing::serial_reference(counts, c.workers, steps, sgd);
  for (int rank = 0; rank < c.workers; ++rank) {
    for (size_t t = 0; t < counts.size(); ++t) {
      const auto& got = finals[static_cast<size_t>(rank)][t];
      ASSERT_EQ(got.size(), counts[t]);
      for (size_t j = 0; j < counts[t]; ++j) {
        // Same float operations in the same order: the same bits.
        ASSERT_EQ(got[j], expected[t][j])
            << "worker " << rank << " tensor " << t << " element " << j;
      }
    }
  }
  for (auto& server : servers.servers) server->wait_until_done();  // every worker said BYE
}

INSTANTIATE_TEST_SUITE_P(
    WorkersServersPolicies, PsSyncMatchesSerial,
    ::testing::Values(SyncCase{1, 1, ShardPolicy::kRoundRobin},
                      SyncCase{2, 1, ShardPolicy::kGreedyBySize},
                      SyncCase{3, 2, ShardPolicy::kRoundRobin},
                      SyncCase{3, 2, ShardPolicy::kGreedyBySize},
                      SyncCase{4, 3, ShardPolicy::kRoundRobin},
                      SyncCase{2, 7, ShardPolicy::kGreedyBySize}),  // servers with no tensor
    [](const ::testing::TestParamInfo<SyncCase>& info) {
      return std::to_string(info.param.workers) + "w" + std::to_string(info.param.servers) + "s" +
             (info.param.policy == ShardPolicy::kRoundRobin ? "RoundRobin" : "Greedy");
    });

TEST(PsSync, EveryWorkerStartsFromWorkerZerosValues) {
  const std::vector<size_t> counts = {10, 3};
  Servers servers(2, "init-secret");
  testing::run_workers(3, [&](int rank) {
    ToyModel model(counts, rank);
    const ToyModel worker_zero(counts, 0);
    PsSync sync(
        testing::worker_options(servers, rank, 3, ShardPolicy::kRoundRobin, false, "init-secret"));
    sync.initialize(model.views);
    EXPECT_EQ(model.values, worker_zero.values) << "worker " << rank;
  });
}

// Asynchronous: gradients that do not depend on the values and momentum 0 make the result
// independent of the order in which pushes are applied (all numbers exact in float), so the
// outcome is closed-form: w = w0 - lr * steps * sum over workers of (rank + 1).
TEST(PsSyncAsync, AppliesEveryPushWithoutWaitingForOthers) {
  const std::vector<size_t> counts = {50, 4, 9};
  const int workers = 3;
  const int64_t steps = 8;
  Servers servers(2, "async-secret");
  auto options_for = [&](int rank) {
    PsSyncOptions options = testing::worker_options(
        servers, rank, workers, ShardPolicy::kGreedyBySize, true, "async-secret");
    options.sgd.momentum = 0;
    options.sgd.weight_decay = 0;
    return options;
  };
  auto step_all = [&](PsSync& sync, ToyModel& model, int rank, int64_t step) {
    const model::StepInfo info{step, 0.25};
    for (size_t t = model.views.size(); t-- > 0;) {
      std::fill(model.grads[t].begin(), model.grads[t].end(), static_cast<float>(rank + 1));
      sync.gradient_ready(t, info);
    }
    sync.finish_step(info);
  };
  // Worker 0 starts and runs all its steps while workers 1 and 2 have only connected: a
  // synchronous server would make it wait for them (and time out). Eighths keep every
  // intermediate value exact.
  ToyModel model0(counts, 0);
  for (auto& tensor : model0.values) {
    for (size_t j = 0; j < tensor.size(); ++j) tensor[j] = static_cast<float>(j % 16) * 0.125f;
  }
  const std::vector<std::vector<float>> initial_values = model0.values;
  PsSync sync0(options_for(0));
  sync0.initialize(model0.views);
  std::vector<std::unique_ptr<ToyModel>> others;
  std::vector<std::unique_ptr<PsSync>> other_syncs;
  for (int rank = 1; rank < workers; ++rank) {
    others.push_back(std::make_unique<ToyModel>(counts, rank));
    other_syncs.push_back(std::make_unique<PsSync>(options_for(rank)));
  }
  testing::run_workers(workers - 1, [&](int i) { other_syncs[i]->initialize(others[i]->views); });
  for (int64_t step = 0; step < steps; ++step) step_all(sync0, model0, 0, step);
  for (size_t t = 0; t < counts.size(); ++t) {
    for (size_t j = 0; j < counts[t]; ++j) {
      ASSERT_EQ(model0.values[t][j], initial_values[t][j] - 0.25f * steps * 1.0f)
          << "worker 0 alone, tensor " << t << " element " << j;
    }
  }
  testing::run_workers(workers - 1, [&](int i) {
    for (int64_t step = 0; step < steps; ++step) step_all(*other_syncs[i], *others[i], i + 1, step);
  });
  // One more (zero) step of worker 0 pulls the state after everyone's pushes.
  const model::StepInfo last{steps, 0.25};
  for (size_t t = 0; t < counts.size(); ++t) {
    std::fill(model0.grads[t].begin(), model0.grads[t].end(), 0.0f);
    sync0.gradient_ready(t, last);
  }
  sync0.finish_step(last);
  const float total = 0.25f * steps * (1 + 2 + 3);
  for (size_t t = 0; t < counts.size(); ++t) {
    for (size_t j = 0; j < counts[t]; ++j) {
      ASSERT_EQ(model0.values[t][j], initial_values[t][j] - total)
          << "tensor " << t << " element " << j;
    }
  }
}

}  // namespace
}  // namespace ringd::ps
