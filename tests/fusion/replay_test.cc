// `ringd bench replay`'s parts: the built-in gradient profiles, the backward schedule, the flags,
// and a small replay through the engine on inproc ranks with every result checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/replay_command.h"
#include "model/gradient_profile.h"
#include "model/replay_schedule.h"
#include "ringd/config.h"
#include "ringd/error.h"
#include "ringd/nccl_local_group.h"
#include "runners/replay_runner.h"
#include "testing/ranks.h"

namespace ringd {
namespace {

TEST(GradientProfiles, BuiltInProfilesMatchTheirNetworks) {
  EXPECT_EQ(model::builtin_profile_names(),
            (std::vector<std::string>{"bert_base", "inception_v3", "resnet50", "vgg16"}));
  const model::GradientProfile resnet = model::load_gradient_profile("resnet50");
  EXPECT_EQ(resnet.tensors.size(), 161u);
  EXPECT_EQ(resnet.total_elements(), 25557032u);
  EXPECT_EQ(resnet.tensors.front().name, "conv1.weight");
  EXPECT_EQ(model::load_gradient_profile("bert_base").tensors.size(), 199u);
  EXPECT_EQ(model::load_gradient_profile("vgg16").total_elements(), 138357544u);
  EXPECT_EQ(model::load_gradient_profile("inception_v3").tensors.size(), 292u);
  try {
    model::load_gradient_profile("alexnet");
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("resnet50"), std::string::npos) << error.what();
  }
  EXPECT_THROW(model::parse_gradient_profile("x", "a\t1\nb 2\n", "x.tsv"), Error);
  EXPECT_THROW(model::parse_gradient_profile("x", "a\t1\na\t2\n", "x.tsv"), Error);
  // Found by tests/fuzz/gradient_profile_fuzz.cc: a count cut short by a NUL byte read as 0, and a
  // tensor of 0 elements was accepted; signs and blanks are not counts either.
  EXPECT_THROW(model::parse_gradient_profile("x", std::string("a\t\0\0\n", 5), "x.tsv"), Error);
  EXPECT_THROW(model::parse_gradient_profile("x", "a\t0\n", "x.tsv"), Error);
  EXPECT_THROW(model::parse_gradient_profile("x", "a\t+5\n", "x.tsv"), Error);
  EXPECT_THROW(model::parse_gradient_profile("x", "a\t 5\n", "x.tsv"), Error);
}

TEST(ReplaySchedule, ReverseOrderSpreadOverTheCompute) {
  const model::GradientProfile profile =
      model::parse_gradient_profile("p", "# comment\na\t100\nb\t300\n\nc\t600\n", "p.tsv");
  const auto uniform = model::backward_schedule(profile, std::chrono::microseconds(3000),
                                                model::ComputeSpread::kUniform);
  ASSERT_EQ(uniform.size(), 3u);
  EXPECT_EQ(uniform[0].tensor, 2u);  // "c", registered last, is ready first
  EXPECT_EQ(uniform[0].at.count(), 1000);
  EXPECT_EQ(uniform[1].at.count(), 2000);
  EXPECT_EQ(uniform[2].tensor, 0u);
  EXPECT_EQ(uniform[2].at.count(), 3000);
  const auto by_size = model::backward_schedule(profile, std::chrono::microseconds(1000),
                                                model::ComputeSpread::kBySize);
  EXPECT_EQ(by_size[0].at.count(), 600);
  EXPECT_EQ(by_size[1].at.count(), 900);
  EXPECT_EQ(by_size[2].at.count(), 1000);
}

bool parse(std::vector<const char*> args, runners::ReplayConfig* config, int* code) {
  args.insert(args.begin(), {"ringd", "bench", "replay"});
  return cli::parse_replay_command_line(static_cast<int>(args.size()), args.data(), config, code);
}

TEST(ReplayCommand, Flags) {
  const char* argv[] = {"ringd", "bench", "replay"};
  EXPECT_TRUE(cli::is_replay_command(3, argv));
  EXPECT_FALSE(cli::is_replay_command(2, argv));
  runners::ReplayConfig config;
  int code = -1;
  ASSERT_TRUE(parse({"--profile", "vgg16", "--compute-ms", "12.5", "--steps", "3", "--no-cache",
                     "--fusion-threshold", "8M", "--compression", "bf16", "--op", "sum", "--spread",
                     "size", "--paired"},
                    &config, &code));
  EXPECT_TRUE(config.paired);
  EXPECT_EQ(config.profile, "vgg16");
  EXPECT_EQ(config.compute_ms, 12.5);
  EXPECT_EQ(config.steps, 3);
  EXPECT_FALSE(config.cache);
  EXPECT_TRUE(config.fusion);
  EXPECT_EQ(config.fusion_threshold_bytes, size_t{8} << 20);
  EXPECT_EQ(config.compression, Compression::kBf16);
  EXPECT_EQ(config.op, ReduceOp::kSum);
  EXPECT_EQ(config.spread, model::ComputeSpread::kBySize);
  runners::ReplayConfig unpaired;
  ASSERT_TRUE(parse({}, &unpaired, &code));
  EXPECT_FALSE(unpaired.paired);
  runners::ReplayConfig bad;
  EXPECT_FALSE(parse({"--no-fusion", "--fusion-threshold", "1M"}, &bad, &code));
  EXPECT_EQ(code, 2);
  EXPECT_FALSE(parse({"--steps", "0"}, &bad, &code));
  EXPECT_EQ(code, 2);

  runners::ReplayConfig devices;
  ASSERT_TRUE(parse({"--local-devices", "3", "--hierarchy", "rs-ag"}, &devices, &code));
  EXPECT_EQ(devices.local_devices, 3);
  EXPECT_EQ(devices.hierarchy, Hierarchy::kRsAg);
  runners::ReplayConfig default_strategy;
  ASSERT_TRUE(parse({"--local-devices", "2"}, &default_strategy, &code));
  EXPECT_EQ(default_strategy.hierarchy, kDefaultHierarchy);
  EXPECT_FALSE(parse({"--hierarchy", "rs-ag"}, &bad, &code));  // one device: nothing inside
  EXPECT_EQ(code, 2);
  EXPECT_FALSE(parse({"--local-devices", "2", "--compression", "dgc"}, &bad, &code));
  EXPECT_EQ(code, 2);
  EXPECT_FALSE(parse({"--local-devices", "2", "--hierarchy", "none"}, &bad, &code));
  EXPECT_EQ(code, 2);

  // --gpus: the engine over an NCCL group; with one GPU per node --hierarchy still means
  // something. Only in builds with NCCL, uncompressed.
  runners::ReplayConfig gpus;
  const bool parsed = parse({"--gpus", "--hierarchy", "rs-ag"}, &gpus, &code);
  EXPECT_EQ(parsed, RINGD_HAVE_NCCL == 1);
  if (parsed) {
    EXPECT_TRUE(gpus.gpus);
    EXPECT_EQ(gpus.hierarchy, Hierarchy::kRsAg);
    EXPECT_FALSE(parse({"--gpus", "--compression", "fp16"}, &bad, &code));
  }
  EXPECT_EQ(code, 2);
}

// A profile of 30 tensors of 7..12007 elements, removed when the test ends.
struct TestProfile {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("ringd_replay_test." + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       "." + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".tsv");
  TestProfile() {
    std::ofstream out(path);
    out << "# test profile\n";
    for (int i = 0; i < 30; ++i) out << "layer" << i << ".weight\t" << (i % 5) * 3000 + 7 << "\n";
  }
  ~TestProfile() { std::filesystem::remove(path); }
};

// Every rank's summary of `config` replayed on `ranks` inproc ranks.
std::vector<runners::ReplaySummary> replay_on_ranks(const runners::ReplayConfig& config,
                                                    int ranks) {
  const model::GradientProfile profile = model::load_gradient_profile(config.profile);
  std::vector<runners::ReplaySummary> summaries(static_cast<size_t>(ranks));
  testing::run_ranks(testing::Transport::kInproc, ranks, [&](Context& ctx) {
    summaries[ctx.rank()] = runners::run_replay_rank(ctx, config, profile);
  });
  return summaries;
}

// A made-up profile on 3 inproc ranks: every gradient of the last step is checked, and the
// steady-state steps run from the response cache without a round to rank 0.
TEST(ReplayRun, SmallProfileOnThreeRanks) {
  const TestProfile file;
  runners::ReplayConfig config;
  config.profile = file.path.string();
  config.compute_ms = 3;
  config.steps = 3;
  config.warmup_steps = 1;
  config.baseline_iters = 1;
  config.check = true;
  const std::vector<runners::ReplaySummary> summaries = replay_on_ranks(config, 3);
  const runners::ReplaySummary& s = summaries[0];
  EXPECT_EQ(s.wrong, 0);
  ASSERT_EQ(s.steps.size(), 3u);
  EXPECT_EQ(s.tensors, 30u);
  for (const runners::ReplayStep& step : s.steps) {
    EXPECT_GE(step.step_ms, 3.0);
    EXPECT_EQ(step.cache_hits, 30u);
    EXPECT_EQ(step.coordinator_rounds, 0u);
    EXPECT_GE(step.cycles, 1u);
  }
  for (const auto& other : summaries) EXPECT_EQ(other.mean_step_ms(), s.mean_step_ms());
  const std::string text = runners::format_replay_text(s);
  EXPECT_NE(text.find("scaling efficiency"), std::string::npos) << text;
  EXPECT_NE(runners::format_replay_json(s).find("\"negotiation_share\""), std::string::npos);
}

// The engine over local devices: 2 nodes x 3 devices, each device's gradients holding its global
// rank + 1; every value on every device is checked against the average over the 6 global ranks.
TEST(ReplayRun, OverLocalDevicesEveryDeviceGetsTheGlobalAverage) {
  const TestProfile file;
  for (Hierarchy strategy : {Hierarchy::kReduceBcast, Hierarchy::kRsAg}) {
    runners::ReplayConfig config;
    config.profile = file.path.string();
    config.steps = 2;
    config.warmup_steps = 1;
    config.baseline_iters = 1;
    config.check = true;
    config.local_devices = 3;
    config.hierarchy = strategy;
    const std::vector<runners::ReplaySummary> summaries = replay_on_ranks(config, 2);
    const runners::ReplaySummary& s = summaries[0];
    EXPECT_EQ(s.wrong, 0) << hierarchy_name(strategy);
    EXPECT_GT(s.one_buffer_ms, 0);
    const std::string text = runners::format_replay_text(s);
    EXPECT_NE(text.find(std::string("2 nodes x 3 CPU devices = 6 ranks (inproc, hierarchy ") +
                        hierarchy_name(strategy) + ")"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("one-buffer hierarchical allreduce"), std::string::npos) << text;
    EXPECT_NE(runners::format_replay_json(s).find("\"local_devices\":3"), std::string::npos);
  }
}

// --paired: before every step one allreduce of all the bytes as one tensor through the engine,
// timed; the step then starts from freshly filled gradients (op sum: a step over the one-buffer
// allreduce's results would be wrong), flat and over 2 nodes x 2 devices. What the ranks sent per
// step counts the steps' buckets only (fp16: half the bytes), not the uncompressed one-buffer runs.
TEST(ReplayRun, PairedTimesTheOneBufferAllreduceBeforeEveryStep) {
  const TestProfile file;
  for (int devices : {1, 2}) {
    runners::ReplayConfig config;
    config.profile = file.path.string();
    config.steps = 3;
    config.warmup_steps = 1;
    config.baseline_iters = 1;
    config.check = true;
    config.op = ReduceOp::kSum;
    config.paired = true;
    config.local_devices = devices;
    if (devices == 1) config.compression = Compression::kFp16;
    const std::vector<runners::ReplaySummary> summaries = replay_on_ranks(config, 2);
    const runners::ReplaySummary& s = summaries[0];
    EXPECT_EQ(s.wrong, 0) << devices;
    ASSERT_EQ(s.steps.size(), 3u);
    for (const runners::ReplayStep& step : s.steps) {
      EXPECT_GT(step.one_buffer_ms, 0) << devices;
      EXPECT_EQ(step.cache_hits, 30u) << devices;  // the one-buffer tensor is not in the step
    }
    for (const auto& other : summaries) {
      for (size_t k = 0; k < s.steps.size(); ++k) {  // the slowest rank's, on every rank
        EXPECT_EQ(other.steps[k].one_buffer_ms, s.steps[k].one_buffer_ms);
      }
    }
    if (devices == 1) {
      EXPECT_EQ(s.compressed_bytes_per_step, static_cast<double>(s.bytes) / 2);
    }
    const std::optional<runners::ReplaySummary::Paired> paired = s.paired();
    ASSERT_TRUE(paired.has_value());
    std::vector<double> ratios;
    for (const runners::ReplayStep& step : s.steps)
      ratios.push_back(step.step_ms / step.one_buffer_ms);
    std::sort(ratios.begin(), ratios.end());
    EXPECT_DOUBLE_EQ(paired->ratio_median, ratios[1]);
    EXPECT_DOUBLE_EQ(paired->ratio_min, ratios[0]);
    EXPECT_DOUBLE_EQ(paired->ratio_max, ratios[2]);
    const std::string text = runners::format_replay_text(s);
    EXPECT_NE(text.find("1-buffer(ms)"), std::string::npos) << text;
    EXPECT_NE(text.find(devices > 1 ? "# paired: the one-buffer hierarchical allreduce"
                                    : "# paired: the one-buffer allreduce"),
              std::string::npos)
        << text;
    EXPECT_NE(runners::format_replay_json(s).find("\"ratio_median\""), std::string::npos);
  }
}

// Without --paired nothing of it is reported.
TEST(ReplayRun, UnpairedReportsNoPairs) {
  const TestProfile file;
  runners::ReplayConfig config;
  config.profile = file.path.string();
  config.steps = 2;
  config.warmup_steps = 0;
  config.baseline_iters = 1;
  const runners::ReplaySummary s = replay_on_ranks(config, 2)[0];
  EXPECT_FALSE(s.paired().has_value());
  EXPECT_EQ(runners::format_replay_text(s).find("# paired"), std::string::npos);
  EXPECT_EQ(runners::format_replay_text(s).find("1-buffer"), std::string::npos);
  EXPECT_EQ(runners::format_replay_json(s).find("\"paired\""), std::string::npos);
  const std::string json = runners::format_replay_json(s);
  EXPECT_EQ(json.find("\"one_buffer_ms\""),
            json.rfind("\"one_buffer_ms\""));  // the top level's only
}

// --gpus refused where it cannot run, before anything is allocated: compression on GPU buffers
// (RINGD_COMPRESSION can ask for it past the flags), and a host without a usable GPU or a build
// without NCCL.
TEST(ReplayRun, GpusWithoutAGpuOrWithCompressionIsRefused) {
  const TestProfile file;
  const model::GradientProfile profile = model::load_gradient_profile(file.path.string());
  runners::ReplayConfig config;
  config.profile = file.path.string();
  config.gpus = true;
  const auto code_of = [&](const runners::ReplayConfig& c) {
    int code = -1;  // no error
    testing::run_ranks(testing::Transport::kInproc, 1, [&](Context& ctx) {
      try {
        runners::run_replay_rank(ctx, c, profile);
      } catch (const Error& e) {
        code = static_cast<int>(e.code());
      }
    });
    return code;
  };
  runners::ReplayConfig compressed = config;
  compressed.compression = Compression::kFp16;
  EXPECT_EQ(code_of(compressed), static_cast<int>(ErrorCode::kInvalidArgument));
#if RINGD_HAVE_NCCL
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
#endif
  EXPECT_EQ(code_of(config), static_cast<int>(ErrorCode::kUnavailable));
}

}  // namespace
}  // namespace ringd
