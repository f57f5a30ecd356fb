// run_elastic_train (runners/elastic_train.h), one thread per process over loopback tcp and a TCP
// rendezvous store: 4 processes train the MLP; the process of rank 2 is lost at step 30 (it leaves
// with an exception, its engine and sockets gone); the other three go on as generation 1 from
// where they were, no step repeated; a process started later joins at the next vote and receives
// the state; the job ends at 4 ranks with every step applied once, identical parameters on every
// process and the test accuracy of an undisturbed run. And what cannot run elastically is refused
// naming the fix.
#include "runners/elastic_train.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ringd/error.h"
#include "ringd/store.h"
#include "testing/teacher_data.h"

namespace ringd::runners {
namespace {

using std::chrono::milliseconds;

using testing::teacher_data;

TrainConfig elastic_config() {
  TrainConfig config;
  config.layers = "16,32,4";
  config.batch_size = 12;  // x max 4 = 48: splits over 2, 3 and 4 ranks
  config.learning_rate = 0.02;
  config.momentum = 0.9;
  config.epochs = 1000;
  config.max_steps = 150;
  config.blas = "openblas";
  config.log_every = int64_t{1} << 40;
  config.elastic_check_every = 5;
  config.seed = 11;
  return config;
}

job::ElasticJobOptions job_options() {
  job::ElasticJobOptions o;
  o.job_id = "elastic-train-test";
  o.bounds.min_ranks = 2;
  o.bounds.max_ranks = 4;
  o.bounds.settle = milliseconds(300);
  o.bounds.timeout = milliseconds(30000);
  o.tcp.bind_address = "127.0.0.1";
  o.tcp.secret = "elastic-train-secret";
  o.tcp.timeout = milliseconds(10000);
  return o;
}

struct Lost {};  // how the lost process leaves

struct Process {
  TrainSummary summary;
  std::vector<int64_t> steps;  // the steps this process ran, in order
  std::string error;
  bool lost = false;
};

// Runs one process's part of a job served by `port` (its own store client and ElasticJob).
void run_process(uint16_t port, const TrainConfig& config, const TrainData& data,
                 const TrainHooks& hooks, Process* out) {
  try {
    TcpStore store("127.0.0.1", port, "elastic-train-secret");
    job::ElasticJob job(store, job_options());
    out->summary = run_elastic_train(job, config, data, hooks);
  } catch (const Lost&) {
    out->lost = true;
  } catch (const std::exception& e) {
    out->error = e.what();
  }
}

TEST(ElasticTrainTest, ALostRankAndANewcomerCostNoStepAndNoAccuracy) {
  const TrainData data = teacher_data(2400, 600);
  const TrainConfig config = elastic_config();

  // Undisturbed: 4 processes, one generation.
  double undisturbed_accuracy = -1;
  {
    TcpStoreServer server("127.0.0.1", 0, "elastic-train-secret");
    std::vector<Process> processes(4);
    std::vector<std::thread> threads;
    for (Process& p : processes) {
      threads.emplace_back(
          [&, out = &p] { run_process(server.port(), config, data, TrainHooks{}, out); });
    }
    for (std::thread& t : threads) t.join();
    for (const Process& p : processes) {
      ASSERT_EQ(p.error, "");
      EXPECT_EQ(p.summary.generations, 1);
      EXPECT_EQ(p.summary.ranks, 4);
      EXPECT_EQ(p.summary.steps_applied, 150);
      EXPECT_EQ(p.summary.params_sha256, processes[0].summary.params_sha256);
      if (p.summary.final_rank == 0) undisturbed_accuracy = p.summary.test_accuracy;
    }
  }
  ASSERT_GT(undisturbed_accuracy, 0.5) << "the MLP did not learn the teacher";

  // Disturbed: rank 2 lost at step 30; a newcomer starts once the others passed step 60.
  TcpStoreServer server("127.0.0.1", 0, "elastic-train-secret");
  std::vector<Process> processes(5);
  std::atomic<bool> lost{false};
  std::atomic<int64_t> furthest{0};
  std::mutex mutex;
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&, i] {
      Process* out = &processes[i];
      if (i == 4) {
        while (furthest < 60) std::this_thread::sleep_for(milliseconds(5));
      }
      TrainHooks hooks;
      hooks.after_step = [&, out](int rank, int64_t step,
                                  const std::vector<model::ParameterView>&) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          out->steps.push_back(step);
        }
        int64_t seen = furthest.load();
        while (step > seen && !furthest.compare_exchange_weak(seen, step)) {
        }
        if (rank == 2 && step == 30 && !lost.exchange(true)) throw Lost{};
      };
      run_process(server.port(), config, data, hooks, out);
    });
  }
  for (std::thread& t : threads) t.join();

  int lost_processes = 0;
  double accuracy = -1;
  std::string digest;
  for (int i = 0; i < 5; ++i) {
    const Process& p = processes[i];
    SCOPED_TRACE("process " + std::to_string(i));
    EXPECT_EQ(p.error, "");
    for (size_t k = 1; k < p.steps.size(); ++k) {
      EXPECT_GT(p.steps[k], p.steps[k - 1]) << "a step ran twice (or backwards)";
    }
    if (p.lost) {
      ++lost_processes;
      EXPECT_EQ(p.steps.back(), 30);
      continue;
    }
    EXPECT_EQ(p.summary.ranks, 4);
    EXPECT_EQ(p.summary.steps_applied, 150) << "an update lost or repeated";
    EXPECT_EQ(p.summary.steps, 150);
    EXPECT_EQ(p.summary.generations, i == 4 ? 1 : 3) << "4 ranks, then 3, then 4 again";
    if (digest.empty()) digest = p.summary.params_sha256;
    EXPECT_EQ(p.summary.params_sha256, digest) << "the replicas differ";
    if (p.summary.final_rank == 0) accuracy = p.summary.test_accuracy;
    if (i == 4) {
      EXPECT_GE(p.steps.front(), 60) << "the newcomer ran steps from before it started";
      EXPECT_NE(p.summary.final_rank, 0) << "the newcomer held no state: not rank 0";
    }
  }
  EXPECT_EQ(lost_processes, 1);
  std::printf("test accuracy: undisturbed %.4f, through a lost rank and a newcomer %.4f\n",
              undisturbed_accuracy, accuracy);
  EXPECT_NEAR(accuracy, undisturbed_accuracy, 0.02);
}

TEST(ElasticTrainTest, BelowMinRanksIsANamedTimeout) {
  const TrainData data = teacher_data(480, 0);
  TcpStoreServer server("127.0.0.1", 0, "elastic-train-secret");
  TcpStore store("127.0.0.1", server.port(), "elastic-train-secret");
  job::ElasticJobOptions options = job_options();
  options.bounds.min_ranks = 3;
  options.bounds.timeout = milliseconds(800);
  options.who = "the only process";
  job::ElasticJob job(store, options);
  try {
    run_elastic_train(job, elastic_config(), data);
    FAIL() << "trained alone with --min-ranks 3";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("1 of --min-ranks 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the only process"), std::string::npos) << e.what();
  }
}

TEST(ElasticTrainTest, WhatCannotRunElasticallyIsRefusedNamingTheFix) {
  rendezvous::ElasticBounds bounds;
  bounds.min_ranks = 2;
  bounds.max_ranks = 4;
  TrainConfig config = elastic_config();
  EXPECT_NO_THROW(check_elastic_config(config, bounds));
  config.batch_size = 8;  // 32: not over 3 ranks
  try {
    check_elastic_config(config, bounds);
    FAIL() << "a global batch of 32 over 3 ranks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 ranks would not; --batch-size 9 would"),
              std::string::npos)
        << e.what();
  }
  for (auto change : std::vector<std::function<void(TrainConfig&)>>{
           [](TrainConfig& c) { c.mode = SyncMode::kPs; },
           [](TrainConfig& c) { c.local_devices = 2; },
           [](TrainConfig& c) { c.compression = Compression::kDgc; },
           [](TrainConfig& c) { c.checkpoint_dir = "/tmp/x"; },
           [](TrainConfig& c) { c.elastic_check_every = 0; }}) {
    TrainConfig bad = elastic_config();
    change(bad);
    EXPECT_THROW(check_elastic_config(bad, bounds), Error);
  }
}

}  // namespace
}  // namespace ringd::runners
