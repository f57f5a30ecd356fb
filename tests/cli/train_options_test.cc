// `ringd train` options that must reach the right place: --iface to the co-located parameter
// servers, --json checked before any work, and the replay model's progress lines (step time and
// gradient bytes, not a meaningless loss).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/train_command.h"
#include "ringd/config.h"
#include "ringd/error.h"
#include "ringd/nccl_local_group.h"
#include "runners/train_report.h"
#include "runners/train_runner.h"
#include "testing/ranks.h"
#include "testing/tiny_train.h"

namespace ringd::cli {
namespace {

runners::TrainConfig tiny_ps_config(const std::string& interface) {
  runners::TrainConfig config = testing::tiny_train_config(2);
  config.mode = runners::SyncMode::kPs;
  config.ps.colocate = 1;
  config.interface = interface;
  config.blas = "openblas";
  return config;
}

// The co-located server advertises --iface's address, as the job's tcp transport does (before,
// only RINGD_IFACE reached it, and with several hosts the workers could not reach worker 0's
// server). An interface that does not exist is named; "lo" works.
// Layers whose parameters cannot fit in this host's memory are a usage error before any work,
// saying how much they need (before: the parse passed and the run died with "std::bad_alloc").
TEST(TrainOptions, LayersTooLargeForThisHostAreRefusedSayingWhatTheyNeed) {
  const char* argv[] = {"ringd", "train", "--layers", "784,1048576,1048576,10"};
  runners::TrainConfig config;
  int exit_code = -1;
  ::testing::internal::CaptureStderr();
  const bool run = parse_train_command_line(4, argv, &config, &exit_code);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(run);
  EXPECT_EQ(exit_code, 2);
  EXPECT_NE(err.find("--layers 784,1048576,1048576,10"), std::string::npos) << err;
  EXPECT_NE(err.find("1,100,346,294,282 floats"), std::string::npos) << err;
  EXPECT_NE(err.find("8802.8 GB"), std::string::npos) << err;
}

TEST(TrainOptions, IfaceReachesTheColocatedParameterServer) {
  const runners::TrainData data = testing::tiny_train_data();
  try {
    testing::run_ranks(testing::Transport::kInproc, 1, [&](Context& ctx) {
      runners::run_train_rank(ctx, tiny_ps_config("nosuchif0"), data);
    });
    FAIL() << "--iface nosuchif0 was not used by the co-located server";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument) << error.what();
    EXPECT_NE(std::string(error.what()).find("'nosuchif0'"), std::string::npos) << error.what();
  }
  runners::TrainSummary summary;
  testing::run_ranks(testing::Transport::kInproc, 1, [&](Context& ctx) {
    summary = runners::run_train_rank(ctx, tiny_ps_config("lo"), data);
  });
  EXPECT_EQ(summary.steps, 2);
}

TEST(TrainOptions, AnUnwritableJsonPathIsAUsageErrorBeforeAnyWork) {
  for (const char* flag : {"--json", "--params-out"}) {
    const char* argv[] = {"ringd", "train", flag, "/nonexistent-ringd-dir/out"};
    runners::TrainConfig config;
    int exit_code = -1;
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(parse_train_command_line(4, argv, &config, &exit_code)) << flag;
    const std::string text = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(exit_code, 2) << flag;
    EXPECT_NE(text.find(flag), std::string::npos) << text;
    EXPECT_NE(text.find("directory /nonexistent-ringd-dir does not exist"), std::string::npos)
        << text;
  }
}

// scripts/demo.sh passes its defaults and then the user's arguments: the last value wins.
TEST(TrainOptions, AFlagGivenTwiceTakesItsLastValue) {
  const char* argv[] = {"ringd", "train", "--epochs", "8", "--lr", "0.1", "--epochs", "1"};
  runners::TrainConfig config;
  int exit_code = -1;
  ASSERT_TRUE(parse_train_command_line(8, argv, &config, &exit_code)) << exit_code;
  EXPECT_EQ(config.epochs, 1);
  EXPECT_DOUBLE_EQ(config.learning_rate, 0.1);
}

// With --compression dgc the schedule defaults to cosine (DGC's paper decays the rate; issue 35,
// item 6); an explicit --lr-schedule constant still wins, and dense training keeps constant.
TEST(TrainOptions, DgcDefaultsToTheCosineSchedule) {
  runners::TrainConfig config;
  int exit_code = -1;
  const char* dgc[] = {"ringd", "train", "--compression", "dgc"};
  ASSERT_TRUE(parse_train_command_line(4, dgc, &config, &exit_code)) << exit_code;
  EXPECT_EQ(config.lr_schedule, runners::LrSchedule::kCosine);
  const char* constant[] = {"ringd", "train", "--compression", "dgc", "--lr-schedule", "constant"};
  config = runners::TrainConfig{};
  ASSERT_TRUE(parse_train_command_line(6, constant, &config, &exit_code)) << exit_code;
  EXPECT_EQ(config.lr_schedule, runners::LrSchedule::kConstant);
  const char* dense[] = {"ringd", "train"};
  config = runners::TrainConfig{};
  ASSERT_TRUE(parse_train_command_line(2, dense, &config, &exit_code)) << exit_code;
  EXPECT_EQ(config.lr_schedule, runners::LrSchedule::kConstant);
}

// --lr-schedule reaches the training loop: cosine decays over the planned epochs (so the same
// run ends elsewhere than with the constant rate) and the summary names it; other names are a
// usage error naming the flag.
TEST(TrainOptions, LrScheduleFlag) {
  const char* argv[] = {"ringd", "train", "--lr-schedule", "cosine"};
  runners::TrainConfig parsed;
  int exit_code = -1;
  ASSERT_TRUE(parse_train_command_line(4, argv, &parsed, &exit_code)) << exit_code;
  EXPECT_EQ(parsed.lr_schedule, runners::LrSchedule::kCosine);
  const char* bad[] = {"ringd", "train", "--lr-schedule", "step"};
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(parse_train_command_line(4, bad, &parsed, &exit_code));
  const std::string text = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(exit_code, 2);
  EXPECT_NE(text.find("--lr-schedule"), std::string::npos) << text;

  const runners::TrainData data = testing::tiny_train_data();
  std::vector<runners::TrainSummary> summaries;
  for (const runners::LrSchedule schedule :
       {runners::LrSchedule::kConstant, runners::LrSchedule::kCosine}) {
    runners::TrainConfig config = testing::tiny_train_config(0);
    config.epochs = 2;  // 2 x 64 / (2 ranks x 4) = 16 steps
    config.warmup_steps = 2;
    config.lr_schedule = schedule;
    testing::run_ranks(testing::Transport::kInproc, 2, [&](Context& ctx) {
      runners::TrainSummary summary = runners::run_train_rank(ctx, config, data);
      if (ctx.rank() == 0) summaries.push_back(summary);
    });
  }
  ASSERT_EQ(summaries.size(), 2u);
  EXPECT_EQ(summaries[0].lr_schedule, "constant");
  EXPECT_EQ(summaries[1].lr_schedule, "cosine");
  EXPECT_EQ(summaries[1].steps, 16);
  EXPECT_NE(summaries[0].params_sha256, summaries[1].params_sha256);
  EXPECT_NE(runners::format_train_summary(summaries[1]).find("cosine-decayed"), std::string::npos);
}

TEST(TrainOptions, CompressionFlags) {
  {
    const char* argv[] = {"ringd",          "train", "--compression",       "dgc",
                          "--dgc-sparsity", "0.99",  "--dgc-warmup-epochs", "0"};
    runners::TrainConfig config;
    int exit_code = -1;
    ASSERT_TRUE(parse_train_command_line(8, argv, &config, &exit_code)) << exit_code;
    EXPECT_EQ(config.compression, Compression::kDgc);
    EXPECT_DOUBLE_EQ(config.dgc_sparsity, 0.99);
    EXPECT_EQ(config.dgc_warmup_epochs, 0);
  }
  // Usage errors (exit 2), each naming its flag: no compression in ps mode, unknown names,
  // sparsities outside [0, 1).
  const std::vector<std::vector<const char*>> bad = {
      {"ringd", "train", "--mode", "ps", "--compression", "dgc"},
      {"ringd", "train", "--compression", "topk"},
      {"ringd", "train", "--dgc-sparsity", "1"},
      {"ringd", "train", "--dgc-sparsity", "-0.5"},
      {"ringd", "train", "--dgc-warmup-epochs", "-1"},
  };
  for (const auto& argv : bad) {
    runners::TrainConfig config;
    int exit_code = -1;
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(
        parse_train_command_line(static_cast<int>(argv.size()), argv.data(), &config, &exit_code))
        << argv[2];
    const std::string text = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(exit_code, 2) << argv[2];
    const std::string flag = argv[argv.size() - 2];
    EXPECT_NE(text.find(flag), std::string::npos) << text;
  }
}

TEST(TrainOptions, LocalDeviceFlags) {
  {
    const char* argv[] = {"ringd", "train", "--local-devices", "4", "--hierarchy", "rs-ag"};
    runners::TrainConfig config;
    int exit_code = -1;
    ASSERT_TRUE(parse_train_command_line(6, argv, &config, &exit_code)) << exit_code;
    EXPECT_EQ(config.local_devices, 4);
    EXPECT_EQ(config.hierarchy, Hierarchy::kRsAg);
  }
  // Usage errors (exit 2) naming the flag: no devices in ps mode, no dgc over devices, a
  // hierarchy without devices, no "none" strategy over devices, at least one device.
  const std::vector<std::vector<const char*>> bad = {
      {"ringd", "train", "--mode", "ps", "--local-devices", "2"},
      {"ringd", "train", "--local-devices", "2", "--compression", "dgc"},
      {"ringd", "train", "--local-devices", "1", "--hierarchy", "rs-ag"},
      {"ringd", "train", "--local-devices", "2", "--hierarchy", "none"},
      {"ringd", "train", "--local-devices", "0"},
  };
  const std::vector<std::string> named = {"--local-devices", "--compression", "--hierarchy",
                                          "--hierarchy", "--local-devices"};
  for (size_t i = 0; i < bad.size(); ++i) {
    runners::TrainConfig config;
    int exit_code = -1;
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(parse_train_command_line(static_cast<int>(bad[i].size()), bad[i].data(), &config,
                                          &exit_code));
    const std::string text = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(exit_code, 2) << text;
    EXPECT_NE(text.find(named[i]), std::string::npos) << text;
  }
}

runners::ProgressInterval two_steps() {
  runners::ProgressInterval interval;
  model::ForwardResult result;
  result.loss = 0.5;
  result.correct = 3;
  interval.add(result, 4, 0.200, 0.050);  // 200 ms steps, 25% blocked
  interval.add(result, 4, 0.200, 0.050);
  return interval;
}

TEST(TrainOptions, ReplayProgressShowsStepTimeAndBytesNotALoss) {
  runners::ProgressLine line;
  line.epoch = 1;
  line.epochs = 3;
  line.step = 2;
  line.steps = 30;
  line.global_batch = 8;
  line.eta_seconds = 5.6;
  line.replay = true;
  line.gradient_bytes_per_step = 100.0 * (1 << 20);  // 100 MiB
  const std::string replay = runners::format_progress(line, two_steps());
  EXPECT_EQ(replay,
            "epoch 1/3  step 2/30  step time 200.0 ms  gradients 100.0 MiB/step  0.524 GB/s  "
            "samples/s 40  comm 25%  ETA 0:06");
  line.replay = false;
  const std::string mlp = runners::format_progress(line, two_steps());
  EXPECT_NE(mlp.find("loss 0.5000  acc 0.750"), std::string::npos) << mlp;
}

// --gpus: only in builds with NCCL, and refused with what cannot run on GPU buffers (usage
// errors, exit 2); at run time without a usable GPU (or NCCL) kUnavailable, and compression that
// RINGD_COMPRESSION could ask for past the flags kInvalidArgument, before any training.
TEST(TrainOptions, GpusIsRefusedWhereItCannotRun) {
  runners::TrainConfig config;
  int exit_code = -1;
  const char* gpus[] = {"ringd", "train", "--gpus", "--local-devices", "2"};
  ::testing::internal::CaptureStderr();
  const bool parsed = parse_train_command_line(5, gpus, &config, &exit_code);
  std::string text = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(parsed, RINGD_HAVE_NCCL == 1) << text;
  if (parsed) {
    EXPECT_TRUE(config.gpus);
    EXPECT_EQ(config.local_devices, 2);
  } else {
    EXPECT_EQ(exit_code, 2);
    EXPECT_NE(text.find("--gpus: needs a CUDA build with NCCL"), std::string::npos) << text;
  }
  for (const std::vector<const char*>& bad :
       std::vector<std::vector<const char*>>{{"ringd", "train", "--gpus", "--mode", "ps"},
                                             {"ringd", "train", "--gpus", "--compression", "fp16"},
                                             {"ringd", "train", "--gpus", "--blas", "openblas"}}) {
    runners::TrainConfig refused;
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(
        parse_train_command_line(static_cast<int>(bad.size()), bad.data(), &refused, &exit_code))
        << bad[3];
    text = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(exit_code, 2);
    EXPECT_NE(text.find("--gpus"), std::string::npos) << text;
  }

  const runners::TrainData data = testing::tiny_train_data();
  const auto code_of = [&](const runners::TrainConfig& c) {
    int code = -1;  // no error
    testing::run_ranks(testing::Transport::kInproc, 1, [&](Context& ctx) {
      try {
        runners::run_train_rank(ctx, c, data);
      } catch (const Error& e) {
        code = static_cast<int>(e.code());
      }
    });
    return code;
  };
  runners::TrainConfig on_gpus = testing::tiny_train_config(2);
  on_gpus.gpus = true;
  runners::TrainConfig compressed = on_gpus;
  compressed.compression = Compression::kFp16;
  EXPECT_EQ(code_of(compressed), static_cast<int>(ErrorCode::kInvalidArgument));
#if RINGD_HAVE_NCCL
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
#endif
  EXPECT_EQ(code_of(on_gpus), static_cast<int>(ErrorCode::kUnavailable));
}

// The summary names the devices: CPU devices, or GPUs through NCCL (even one).
TEST(TrainOptions, SummaryNamesTheLocalDevices) {
  runners::TrainSummary s;
  s.model = "mlp 4-3-2";
  s.mode = "allreduce";
  s.ranks = 2;
  s.transport = "tcp";
  EXPECT_EQ(runners::format_train_summary(s).find("devices"), std::string::npos);
  s.local_devices = 2;
  s.local_group = "cpu";
  EXPECT_NE(runners::format_train_summary(s).find("2 ranks x 2 CPU devices over tcp"),
            std::string::npos);
  s.local_group = "nccl";
  EXPECT_NE(runners::format_train_summary(s).find("2 ranks x 2 GPUs (NCCL) over tcp"),
            std::string::npos);
  s.local_devices = 1;
  EXPECT_NE(runners::format_train_summary(s).find("2 ranks x 1 GPU (NCCL) over tcp"),
            std::string::npos);
  EXPECT_NE(runners::format_train_json(s).find("\"local_group\":\"nccl\""), std::string::npos)
      << runners::format_train_json(s);
}

}  // namespace
}  // namespace ringd::cli
