// The bench's table, footer and JSON lines (nccl-tests layout, exact JSON keys).
#include "runners/bench_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ringd::runners {
namespace {

TEST(BenchReport, BusBandwidthFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllreduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllreduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllgather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllreduce, 1), 0.0);
}

TEST(BenchReport, MakeRowComputesBandwidths) {
  const BenchRow row = make_row(Collective::kAllreduce, 4000000, 1000000, DataType::kFloat32,
                                ReduceOp::kSum, 3, 4, "mpi", 2000.0, 0);
  EXPECT_DOUBLE_EQ(row.algbw_gbps, 2.0);  // 4 MB in 2 ms
  EXPECT_DOUBLE_EQ(row.busbw_gbps, 3.0);
  EXPECT_EQ(row.root, -1);  // root only means something for broadcast
  const BenchRow broadcast = make_row(Collective::kBroadcast, 100, 25, DataType::kFloat32,
                                      ReduceOp::kSum, 3, 4, "tcp", 0.0, -1);
  EXPECT_EQ(broadcast.root, 3);
  EXPECT_DOUBLE_EQ(broadcast.algbw_gbps, 0.0);  // no division by a zero time
}

TEST(BenchReport, RowLayout) {
  const BenchRow row = make_row(Collective::kAllreduce, 4096, 1024, DataType::kFloat32,
                                ReduceOp::kSum, 0, 4, "mpi", 52.3125, 0);
  EXPECT_EQ(
      format_row(row),
      "        4096          1024     float     sum      -1    52.31    0.078    0.117       0\n");
  BenchRow slow = make_row(Collective::kBroadcast, 67108864, 16777216, DataType::kBFloat16,
                           ReduceOp::kSum, 2, 4, "tcp", 123456.0, -1);
  EXPECT_EQ(
      format_row(slow),
      "    67108864      16777216  bfloat16    none       2   123456    0.544    0.544     N/A\n");
}

TEST(BenchReport, HeaderNamesTheRunAndColumns) {
  ReportHeader header;
  header.collective = Collective::kAllreduce;
  header.ranks = 8;
  header.transport = "tcp";
  header.dtype = DataType::kFloat16;
  header.op = ReduceOp::kMax;
  header.algorithm = "ring";
  const std::string text = format_header(header);
  for (const char* part :
       {"ranks: 8", "transport: tcp", "dtype: half", "op: max", "algorithm: ring", "size", "count",
        "type", "redop", "root", "time", "algbw", "busbw", "#wrong"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " missing from\n" << text;
  }
  for (size_t start = 0; start < text.size();) {  // every header line is a comment
    EXPECT_EQ(text[start], '#');
    start = text.find('\n', start) + 1;
  }
}

TEST(BenchReport, FooterCountsWrongValuesAndAveragesBusBandwidth) {
  std::vector<BenchRow> rows = {make_row(Collective::kAllgather, 1000, 250, DataType::kFloat32,
                                         ReduceOp::kSum, 0, 2, "tcp", 1.0, 0),
                                make_row(Collective::kAllgather, 3000, 750, DataType::kFloat32,
                                         ReduceOp::kSum, 0, 2, "tcp", 1.0, 0)};
  EXPECT_EQ(format_footer(rows, true),
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth : 1\n#\n");
  rows[1].wrong = 7;
  EXPECT_NE(format_footer(rows, true).find("# Out of bounds values : 7 FAILED"), std::string::npos);
}

TEST(BenchReport, FooterWithoutCheckSaysNothingWasChecked) {
  std::vector<BenchRow> rows = {make_row(Collective::kAllreduce, 1000, 250, DataType::kFloat32,
                                         ReduceOp::kSum, 0, 2, "tcp", 1.0, -1)};
  const std::string footer = format_footer(rows, false);
  EXPECT_NE(footer.find("# Out of bounds values : not checked"), std::string::npos) << footer;
  EXPECT_EQ(footer.find("OK"), std::string::npos) << footer;
}

TEST(BenchReport, OneRankSaysNothingCrossesANetworkAndHowToRunMore) {
  ReportHeader one;
  one.ranks = 1;
  const std::string text = format_header(one);
  EXPECT_NE(text.find("one rank: nothing crosses a network"), std::string::npos) << text;
  EXPECT_NE(text.find("mpirun -np N ringd bench"), std::string::npos) << text;
  EXPECT_NE(text.find("--transport inproc --ranks N"), std::string::npos) << text;
  ReportHeader node = one;  // one node of 4 local devices: the local steps are measured
  node.ranks = 4;
  node.nodes = 1;
  node.local_devices = 4;
  EXPECT_NE(format_header(node).find("one node: nothing crosses a network"), std::string::npos)
      << format_header(node);
  for (const int ranks : {2, 8}) {
    ReportHeader many = one;
    many.ranks = ranks;
    EXPECT_EQ(format_header(many).find("NOTE"), std::string::npos) << format_header(many);
  }
  ReportHeader nodes = node;  // two nodes
  nodes.ranks = 8;
  nodes.nodes = 2;
  EXPECT_EQ(format_header(nodes).find("NOTE"), std::string::npos) << format_header(nodes);
}

TEST(BenchReport, JsonHasExactlyTheDocumentedKeys) {
  const BenchRow row = make_row(Collective::kReduceScatter, 8192, 2048, DataType::kInt32,
                                ReduceOp::kProd, 0, 4, "inproc", 10.0, 0);
  const std::string line = format_json(row);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const nlohmann::json object = nlohmann::json::parse(line);
  std::vector<std::string> keys;
  for (const auto& item : object.items()) keys.push_back(item.key());
  std::sort(keys.begin(), keys.end());
  const std::vector<std::string> expected = {"algbw_GBps", "busbw_GBps", "bytes", "count",
                                             "dtype",      "op",         "ranks", "redop",
                                             "time_us",    "transport",  "wrong"};
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(object["op"], "reducescatter");
  EXPECT_EQ(object["redop"], "prod");
  EXPECT_EQ(object["dtype"], "int32");
  EXPECT_EQ(object["bytes"], 8192);
  EXPECT_EQ(object["count"], 2048);
  EXPECT_EQ(object["ranks"], 4);
  EXPECT_EQ(object["transport"], "inproc");
  EXPECT_DOUBLE_EQ(object["algbw_GBps"].get<double>(), 0.8192);
  EXPECT_DOUBLE_EQ(object["busbw_GBps"].get<double>(), 0.8192 * 0.75);
  EXPECT_EQ(object["wrong"], 0);

  BenchRow unchecked = row;
  unchecked.wrong = -1;
  EXPECT_TRUE(nlohmann::json::parse(format_json(unchecked))["wrong"].is_null());
}

TEST(BenchReport, HierarchicalRowsAddNodeBandwidthColumnAndKeys) {
  // 4 nodes x 4 devices: busbw over all 16 ranks, nodebw over the 4 nodes.
  BenchRow row = make_row(Collective::kAllreduce, 4000000, 1000000, DataType::kFloat32,
                          ReduceOp::kSum, 0, 16, "tcp", 2000.0, 0);
  add_hierarchy(&row, 4, 4, "rs-ag");
  EXPECT_DOUBLE_EQ(row.algbw_gbps, 2.0);
  EXPECT_DOUBLE_EQ(row.busbw_gbps, 2.0 * 2 * 15 / 16);
  EXPECT_DOUBLE_EQ(row.node_busbw_gbps, 2.0 * 2 * 3 / 4);
  EXPECT_EQ(format_row(row),
            "     4000000       1000000     float     sum      -1   2000.0    2.000    3.750       "
            "0    3.000\n");
  const nlohmann::json object = nlohmann::json::parse(format_json(row));
  EXPECT_EQ(object["ranks"], 16);
  EXPECT_EQ(object["nodes"], 4);
  EXPECT_EQ(object["local_devices"], 4);
  EXPECT_EQ(object["hierarchy"], "rs-ag");
  EXPECT_DOUBLE_EQ(object["node_busbw_GBps"].get<double>(), 3.0);

  BenchRow gather = make_row(Collective::kAllgather, 1600, 400, DataType::kFloat32, ReduceOp::kSum,
                             0, 8, "inproc", 1.0, -1);
  add_hierarchy(&gather, 2, 4, "reduce-bcast");
  EXPECT_DOUBLE_EQ(gather.node_busbw_gbps, 1.6 * 0.5);

  ReportHeader header;
  header.ranks = 16;
  header.nodes = 4;
  header.local_devices = 4;
  header.hierarchy = "rs-ag";
  const std::string text = format_header(header);
  for (const char* part :
       {"ranks: 16", "nodes: 4", "local devices: 4", "hierarchy: rs-ag", "nodebw"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " missing from\n" << text;
  }
  EXPECT_EQ(format_header(ReportHeader{}).find("nodebw"), std::string::npos)
      << "flat runs keep nccl-tests' columns";
}

}  // namespace
}  // namespace ringd::runners
