// What rank 0 of `ringd bench` publishes for its pod's agent (RINGD_METRICS_FILE).
#include "runners/metrics_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace ringd::runners {
namespace {

TEST(MetricsFile, BenchRowsBecomePrometheusText) {
  std::vector<BenchRow> rows;
  EXPECT_EQ(bench_metrics_text(rows, 20), "");
  rows.push_back(make_row(Collective::kAllreduce, 4096, 1024, DataType::kFloat32, ReduceOp::kSum,
                          -1, 4, "mpi", 100.0, 0));
  rows.push_back(make_row(Collective::kAllreduce, 1 << 20, 1 << 18, DataType::kFloat32,
                          ReduceOp::kSum, -1, 4, "mpi", 1000.0, 3));
  const std::string text = bench_metrics_text(rows, 20);
  const std::string labels = "{collective=\"allreduce\",transport=\"mpi\",ranks=\"4\"}";
  EXPECT_NE(text.find("ringd_bench_bytes_total" + labels + " " +
                      std::to_string((4096 + (1 << 20)) * 20) + "\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ringd_bench_time_seconds" + labels + " 0.001\n"), std::string::npos) << text;
  // busbw = algbw x 2(n-1)/n = 1 MiB / 1 ms x 1.5
  EXPECT_NE(text.find("ringd_bench_busbw_bytes_per_second" + labels + " 1.572864e+09\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ringd_bench_wrong_total" + labels + " 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE ringd_bench_bytes_total counter\n"), std::string::npos);
}

TEST(MetricsFile, TrainingFiguresBecomePrometheusText) {
  TrainMetrics metrics;
  metrics.mode = "ps";
  metrics.ranks = 4;
  metrics.steps = 12;
  metrics.last_step_seconds = 0.25;
  metrics.samples_total = 12 * 256;
  metrics.gradient_bytes_total = 12 * 814120.0;
  metrics.communication_ratio = 0.125;
  const std::string text = train_metrics_text(metrics);
  const std::string labels = "{mode=\"ps\",ranks=\"4\"}";
  EXPECT_NE(text.find("ringd_train_steps_total" + labels + " 12\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ringd_train_step_seconds" + labels + " 0.25\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ringd_train_samples_total" + labels + " 3072\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE ringd_train_samples_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("ringd_train_gradient_bytes_total" + labels + " 9769440\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ringd_train_communication_ratio" + labels + " 0.125\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE ringd_train_steps_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE ringd_train_step_seconds gauge\n"), std::string::npos);
}

// The engine's per-rank lag (the straggler) as one family with a sample per rank; none without.
TEST(MetricsFile, EveryRanksLagIsASampleOfOneFamily) {
  TrainMetrics metrics;
  metrics.mode = "allreduce";
  EXPECT_EQ(train_metrics_text(metrics).find("ringd_rank_lag_seconds"), std::string::npos);
  metrics.rank_lag_seconds = {0, 0.002, 0.31};
  const std::string text = train_metrics_text(metrics);
  EXPECT_NE(text.find("# TYPE ringd_rank_lag_seconds gauge\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ringd_rank_lag_seconds{mode=\"allreduce\",rank=\"0\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ringd_rank_lag_seconds{mode=\"allreduce\",rank=\"2\"} 0.31\n"),
            std::string::npos)
      << text;
}

TEST(MetricsFile, PublishReplacesTheFileAndToleratesABadPath) {
  char pattern[] = "/tmp/ringd-metrics-test-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string path = std::string(pattern) + "/metrics.prom";
  publish_metrics(path, "a 1\n");
  publish_metrics(path, "b 2\n");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "b 2\n");
  publish_metrics("/nonexistent-ringd-dir/metrics.prom", "x 1\n");  // warns, does not throw
  publish_metrics("", "x 1\n");                                     // unset: nothing
  EXPECT_EQ(::unlink(path.c_str()), 0);
  EXPECT_EQ(::rmdir(pattern), 0);
}

}  // namespace
}  // namespace ringd::runners
