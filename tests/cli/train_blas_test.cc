// `ringd train --blas auto|openblas|cublas`: the flag's values, cublas where it cannot run being
// a usage error (exit 2) that says why and what to pass instead, rank 0's choice becoming the
// job's (and a failed choice failing every rank, none left waiting), and the backend named in the
// summary line and the --json summary.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/train_command.h"
#include "model/gemm.h"
#include "ringd/error.h"
#include "runners/train_report.h"
#include "runners/train_runner.h"
#include "testing/ranks.h"
#include "testing/tiny_train.h"

namespace ringd::cli {
namespace {

struct Parsed {
  bool run = false;
  int exit_code = -1;
  runners::TrainConfig config;
  std::string stderr_text;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"ringd", "train"});
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  Parsed parsed;
  ::testing::internal::CaptureStderr();
  parsed.run = parse_train_command_line(static_cast<int>(argv.size()), argv.data(), &parsed.config,
                                        &parsed.exit_code);
  parsed.stderr_text = ::testing::internal::GetCapturedStderr();
  return parsed;
}

TEST(TrainBlas, FlagValues) {
  const Parsed defaults = parse({});
  ASSERT_TRUE(defaults.run) << defaults.stderr_text;
  EXPECT_EQ(defaults.config.blas, "auto");
  const Parsed cpu = parse({"--blas", "openblas"});
  ASSERT_TRUE(cpu.run) << cpu.stderr_text;
  EXPECT_EQ(cpu.config.blas, "openblas");
  const Parsed unknown = parse({"--blas", "mkl"});
  EXPECT_FALSE(unknown.run);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.stderr_text.find("--blas"), std::string::npos) << unknown.stderr_text;
}

TEST(TrainBlas, CublasWhereItCannotRunExitsTwoSayingWhy) {
  const std::string reason = model::cublas_unavailable_reason();
  const Parsed p = parse({"--blas", "cublas"});
  if (reason.empty()) {  // a cuBLAS build on a GPU host
    EXPECT_TRUE(p.run) << p.stderr_text;
    EXPECT_EQ(p.config.blas, "cublas");
    return;
  }
  EXPECT_FALSE(p.run);
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.stderr_text.find("--blas cublas: " + reason), std::string::npos) << p.stderr_text;
  EXPECT_NE(p.stderr_text.find("use --blas openblas"), std::string::npos) << p.stderr_text;
}

runners::TrainConfig tiny_config(const std::string& blas) {
  runners::TrainConfig config = testing::tiny_train_config(3);
  config.blas = blas;
  return config;
}

TEST(TrainBlas, TheJobsBackendIsInTheSummaryAndTheJson) {
  const runners::TrainData data = testing::tiny_train_data();
  const std::string expected =
      model::cublas_unavailable_reason().empty() ? "cublas" : "openblas";  // what auto picks
  for (const std::string& blas : {std::string("openblas"), std::string("auto")}) {
    const runners::TrainConfig config = tiny_config(blas);
    std::vector<runners::TrainSummary> summaries(3);
    testing::run_ranks(testing::Transport::kInproc, 3, [&](Context& ctx) {
      summaries[static_cast<size_t>(ctx.rank())] = runners::run_train_rank(ctx, config, data);
    });
    const std::string want = blas == "auto" ? expected : blas;
    for (const runners::TrainSummary& summary : summaries)
      EXPECT_EQ(summary.blas, want) << "--blas " << blas;
    EXPECT_NE(runners::format_train_summary(summaries[0]).find("matrix products on " + want + "):"),
              std::string::npos)
        << runners::format_train_summary(summaries[0]);
    EXPECT_NE(runners::format_train_json(summaries[0]).find("\"blas\":\"" + want + "\""),
              std::string::npos)
        << runners::format_train_json(summaries[0]);
  }
}

TEST(TrainBlas, ACublasChoiceThatFailsOnRankZeroFailsEveryRank) {
  if (model::cublas_unavailable_reason().empty()) GTEST_SKIP() << "cuBLAS can run here";
  // Past the flag check (as a config built in code would be): rank 0 cannot set cuBLAS up.
  const runners::TrainConfig config = tiny_config("cublas");
  const runners::TrainData data = testing::tiny_train_data();
  const auto result = testing::run_ranks_collect(testing::Transport::kInproc, 3, [&](Context& ctx) {
    runners::run_train_rank(ctx, config, data);
  });
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(result.errors[static_cast<size_t>(rank)]) << "rank " << rank << " went on";
    try {
      std::rethrow_exception(result.errors[static_cast<size_t>(rank)]);
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kUnavailable) << error.what();
      EXPECT_NE(std::string(error.what()).find(rank == 0 ? "--blas cublas: " : "rank 0 could not"),
                std::string::npos)
          << error.what();
    }
  }
}

}  // namespace
}  // namespace ringd::cli
