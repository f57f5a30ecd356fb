// Checkpoints of whole `ringd train` runs (2 inproc ranks on tests/testing/tiny_train.h) in a
// directory that already holds other files (issue 15, item 6):
//   * corrupt files with higher steps than the run reaches are neither kept in preference to the
//     run's own checkpoints nor resumed from, and the summary's checkpoint exists;
//   * an older run's checkpoints with higher steps are left alone, not counted against this run's
//     --keep-checkpoints, and --resume continues the run that wrote last;
//   * temporary files of interrupted writes are removed when a run starts;
//   * a name taken by a directory costs a periodic checkpoint (a warning, the run goes on), and
//     the final one's failure is the run's error on rank 0's own terms, not a peer's "peer lost"
//     (issue 35, item 2).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "job/job_context.h"
#include "model/checkpoint.h"
#include "ringd/error.h"
#include "runners/train_runner.h"
#include "testing/ranks.h"
#include "testing/tiny_train.h"

namespace ringd::launcher {
namespace {

namespace fs = std::filesystem;

class CheckpointRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("ringd-ckpt-run-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // 10 steps per checkpoint, keeping `keep`; 8 steps an epoch (64 samples, global batch 8).
  runners::TrainConfig config(int64_t steps, size_t keep, bool resume) const {
    runners::TrainConfig c = testing::tiny_train_config(steps);
    c.epochs = 100;
    c.checkpoint_dir = dir_;
    c.checkpoint_every = 10;
    c.keep_checkpoints = keep;
    c.resume = resume;
    return c;
  }
  // Runs 2 inproc ranks; returns rank 0's summary and (in `params`) its final parameters.
  runners::TrainSummary train(const runners::TrainConfig& c,
                              std::vector<float>* params = nullptr) const {
    runners::TrainSummary summary;
    std::mutex mutex;
    runners::TrainHooks hooks;
    hooks.at_end = [&](int rank, const std::vector<model::ParameterView>& views) {
      if (rank != 0 || !params) return;
      params->clear();
      for (const auto& v : views) params->insert(params->end(), v.value, v.value + v.count);
    };
    const runners::TrainData data = testing::tiny_train_data();
    testing::run_ranks(testing::Transport::kInproc, 2, [&](Context& ctx) {
      runners::TrainSummary mine = runners::run_train_rank(ctx, c, data, hooks);
      std::lock_guard<std::mutex> lock(mutex);
      if (ctx.rank() == 0) summary = mine;
    });
    return summary;
  }
  std::vector<float> final_params_without_checkpoints(int64_t steps) const {
    runners::TrainConfig plain = config(steps, 0, false);
    plain.checkpoint_dir.clear();
    std::vector<float> params;
    train(plain, &params);
    return params;
  }
  std::string at(int64_t step) const { return model::checkpoint_path(dir_, step); }
  void put(const std::string& name, size_t bytes) const {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << std::string(bytes, 'x');
  }

  std::string dir_;
};

// Fails on the old code: pruning counted the corrupt files as the newest two and deleted the
// run's 20 and 30, the summary named the deleted ckpt-30, and the next --resume started at 0.
TEST_F(CheckpointRunTest, CorruptHigherStepsCostTheRunNothing) {
  put("ckpt-0000001000.ringd", 100);
  put("ckpt-0000002000.ringd", 5000);
  const runners::TrainSummary first = train(config(30, 2, /*resume=*/true));
  EXPECT_EQ(first.start_step, 0) << "nothing intact to resume from";
  EXPECT_EQ(first.checkpoint, at(30));
  EXPECT_TRUE(fs::is_regular_file(first.checkpoint)) << "the summary's checkpoint exists";
  EXPECT_EQ(model::list_checkpoints(dir_),
            (std::vector<std::string>{at(2000), at(1000), at(30), at(20)}))
      << "this run's newest two kept, the corrupt files left alone";

  const std::vector<float> uninterrupted = final_params_without_checkpoints(50);
  std::vector<float> resumed;
  const runners::TrainSummary second = train(config(50, 2, true), &resumed);
  EXPECT_EQ(second.start_step, 30);
  EXPECT_EQ(second.resumed_from, at(30));
  EXPECT_EQ(resumed, uninterrupted) << "bitwise where the uninterrupted run ends";
  EXPECT_TRUE(fs::is_regular_file(second.checkpoint)) << second.checkpoint;
}

// Fails on the old code: the new run's --keep-checkpoints 1 deleted its own ckpt-20 and kept the
// older run's ckpt-60, and --resume then "resumed" the older run at step 60.
TEST_F(CheckpointRunTest, AnOlderRunsHigherStepsAreNotKeptInsteadOrResumed) {
  runners::TrainConfig older = config(60, 0, false);
  older.learning_rate = 0.05;  // another run: same model, batch and seed, another schedule
  train(older);
  const runners::TrainSummary fresh = train(config(20, 1, false));
  EXPECT_EQ(fresh.checkpoint, at(20));
  EXPECT_TRUE(fs::is_regular_file(fresh.checkpoint)) << "the summary's checkpoint exists";
  EXPECT_EQ(model::list_checkpoints(dir_),
            (std::vector<std::string>{at(60), at(50), at(40), at(30), at(20)}))
      << "the new run kept its newest one; the older run's files are not its to delete";

  const std::vector<float> uninterrupted = final_params_without_checkpoints(30);
  std::vector<float> resumed;
  const runners::TrainSummary again = train(config(30, 1, true), &resumed);
  EXPECT_EQ(again.resumed_from, at(20)) << "the run that wrote last is the one resumed";
  EXPECT_EQ(again.start_step, 20);
  EXPECT_EQ(resumed, uninterrupted);
  EXPECT_TRUE(fs::is_regular_file(at(30)));
  EXPECT_FALSE(fs::exists(at(20))) << "keep 1: the resumed run's older file goes";
  EXPECT_TRUE(fs::is_regular_file(at(60))) << "the older run's file stays";
}

// Fails on the old code: the temporaries of killed writes stayed for ever.
TEST_F(CheckpointRunTest, TemporariesOfInterruptedWritesAreRemovedAtStart) {
  put(".tmp-999999-ckpt-0000000010.ringd", 3000);
  put(".tmp-4-ckpt-0000000500.ringd", 10);
  put(".tmp-notes.txt", 10);  // not ringd's: left alone
  const runners::TrainSummary summary = train(config(10, 3, false));
  EXPECT_TRUE(fs::is_regular_file(summary.checkpoint));
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{".tmp-notes.txt", "ckpt-0000000010.ringd"}));
}

TEST_F(CheckpointRunTest, ADirectoryAtAPeriodicCheckpointsNameCostsAWarningNotTheRun) {
  const std::vector<float> reference = final_params_without_checkpoints(30);
  fs::create_directories(at(20));
  std::vector<float> params;
  const runners::TrainSummary summary = train(config(30, 0, false), &params);
  EXPECT_EQ(summary.steps, 30);
  EXPECT_EQ(summary.checkpoint_failures, 1);
  EXPECT_EQ(summary.checkpoint, at(30));
  EXPECT_TRUE(fs::is_directory(at(20)));  // left alone
  EXPECT_EQ(params, reference);
}

TEST_F(CheckpointRunTest, TheFinalCheckpointsFailureIsTheRunsErrorOnRankZerosOwnTerms) {
  fs::create_directories(at(30));
  const runners::TrainConfig c = config(30, 0, false);
  const runners::TrainData data = testing::tiny_train_data();
  try {
    job::run_inproc_ranks(2, std::chrono::seconds(30), [&](Context& ctx, int) {
      runners::run_train_rank(ctx, c, data, runners::TrainHooks{});
    });
    ADD_FAILURE() << "the run succeeded without its final checkpoint";
  } catch (const ringd::Error& error) {
    EXPECT_EQ(error.code(), ringd::ErrorCode::kIo) << error.what();
    const std::string message = error.what();
    EXPECT_NE(
        message.find("cannot write checkpoint " + at(30) + ": that name is taken by a directory"),
        std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace ringd::launcher
