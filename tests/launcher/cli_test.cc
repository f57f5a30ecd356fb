// Flag parsing: values land in BenchConfig; bad flags exit 2, --help and --version exit 0.
#include "launcher/cli.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ringd::launcher {
namespace {

struct Parsed {
  bool run = false;
  int exit_code = -1;
  CommandLine command;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "ringd");
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  Parsed parsed;
  parsed.run = parse_command_line(static_cast<int>(argv.size()), argv.data(), &parsed.command,
                                  &parsed.exit_code);
  return parsed;
}

TEST(Cli, DefaultsMatchTheDocumentation) {
  const Parsed p = parse({"bench", "allreduce"});
  ASSERT_TRUE(p.run);
  const BenchConfig& c = p.command.bench;
  EXPECT_EQ(c.collective, Collective::kAllreduce);
  EXPECT_EQ(c.min_bytes, 4u << 10);
  EXPECT_EQ(c.max_bytes, 64u << 20);
  EXPECT_EQ(c.step_factor, 4u);
  EXPECT_EQ(c.iters, 20);
  EXPECT_EQ(c.warmup, 5);
  EXPECT_EQ(c.dtype, DataType::kFloat32);
  EXPECT_EQ(c.op, ReduceOp::kSum);
  EXPECT_EQ(c.root, 0);
  EXPECT_FALSE(c.check);
  EXPECT_FALSE(c.in_place);
  EXPECT_EQ(c.algorithm, AllreduceAlgorithm::kAuto);
  EXPECT_EQ(c.timeout.count(), 0);
  EXPECT_TRUE(c.topology.transport.empty());
  EXPECT_EQ(c.local_devices, 1);
  EXPECT_EQ(c.hierarchy, Hierarchy::kNone);
  EXPECT_FALSE(bench_is_hierarchical(c));
}

TEST(Cli, HierarchyFlags) {
  const Parsed explicit_choice = parse({"bench", "allreduce", "--local-devices", "4", "--hierarchy",
                                        "rs-ag", "--ranks", "4", "--transport", "inproc"});
  ASSERT_TRUE(explicit_choice.run);
  EXPECT_EQ(explicit_choice.command.bench.local_devices, 4);
  EXPECT_EQ(explicit_choice.command.bench.hierarchy, Hierarchy::kRsAg);
  EXPECT_TRUE(bench_is_hierarchical(explicit_choice.command.bench));

  // Several devices and no --hierarchy: the measured default, named in --help.
  const Parsed defaulted = parse({"bench", "allgather", "--local-devices", "2"});
  ASSERT_TRUE(defaulted.run);
  EXPECT_EQ(defaulted.command.bench.hierarchy, kDefaultHierarchy);

  // One device with a hierarchy asked for: the hierarchical code path with trivial local steps.
  const Parsed one_device = parse({"bench", "broadcast", "--hierarchy", "reduce-bcast"});
  ASSERT_TRUE(one_device.run);
  EXPECT_EQ(one_device.command.bench.local_devices, 1);
  EXPECT_EQ(one_device.command.bench.hierarchy, Hierarchy::kReduceBcast);
  EXPECT_TRUE(bench_is_hierarchical(one_device.command.bench));

  const Parsed flat = parse({"bench", "allreduce", "--hierarchy", "none", "--local-devices", "1"});
  ASSERT_TRUE(flat.run);
  EXPECT_FALSE(bench_is_hierarchical(flat.command.bench));
}

TEST(Cli, EveryBenchFlag) {
  const Parsed p = parse({"bench",       "reducescatter",
                          "--transport", "inproc",
                          "--ranks",     "6",
                          "-b",          "1K",
                          "-e",          "2M",
                          "-f",          "2",
                          "--iters",     "3",
                          "--warmup",    "0",
                          "--dtype",     "bf16",
                          "--op",        "max",
                          "--check",     "--json",
                          "out.jsonl",   "--algorithm",
                          "ring",        "--segment-bytes",
                          "256K",        "--in-place",
                          "--timeout",   "2.5"});
  ASSERT_TRUE(p.run);
  const BenchConfig& c = p.command.bench;
  EXPECT_EQ(c.collective, Collective::kReduceScatter);
  EXPECT_EQ(c.topology.transport, "inproc");
  EXPECT_EQ(c.topology.inproc_ranks, 6);
  EXPECT_EQ(c.min_bytes, 1024u);
  EXPECT_EQ(c.max_bytes, 2u << 20);
  EXPECT_EQ(c.step_factor, 2u);
  EXPECT_EQ(c.iters, 3);
  EXPECT_EQ(c.warmup, 0);
  EXPECT_EQ(c.dtype, DataType::kBFloat16);
  EXPECT_EQ(c.op, ReduceOp::kMax);
  EXPECT_TRUE(c.check);
  EXPECT_EQ(c.json_path, "out.jsonl");
  EXPECT_EQ(c.algorithm, AllreduceAlgorithm::kRing);
  EXPECT_EQ(c.segment_bytes, 256u << 10);
  EXPECT_TRUE(c.in_place);
  EXPECT_EQ(c.timeout.count(), 2500);
}

TEST(Cli, StandaloneIdentityFlags) {
  const Parsed p =
      parse({"bench", "broadcast", "--root", "2", "--rank", "1", "--size", "3", "--rendezvous",
             "127.0.0.1:29500", "--tcp-port", "41001", "--algorithm", "rd"});
  ASSERT_TRUE(p.run);
  EXPECT_EQ(p.command.bench.root, 2);
  EXPECT_EQ(p.command.bench.topology.rank, 1);
  EXPECT_EQ(p.command.bench.topology.size, 3);
  EXPECT_EQ(p.command.bench.topology.rendezvous, "127.0.0.1:29500");
  EXPECT_EQ(p.command.bench.tcp_port, 41001);
  EXPECT_EQ(p.command.bench.algorithm, AllreduceAlgorithm::kRecursiveDoubling);
}

TEST(Cli, HelpAndVersionExitZero) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--help"}, {"--version"}, {"bench", "--help"}, {"--help-env"}}) {
    const Parsed p = parse(args);
    EXPECT_FALSE(p.run) << args[0];
    EXPECT_EQ(p.exit_code, 0) << args[0];
  }
}

TEST(Cli, BadFlagsExitTwo) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {},
           {"bench"},
           {"bench", "alltoall"},
           {"bench", "allreduce", "--bogus"},
           {"bench", "allreduce", "--dtype", "float128"},
           {"bench", "allreduce", "--op", "xor"},
           {"bench", "allreduce", "-b", "4X"},
           {"bench", "allreduce", "-b", "1M", "-e", "1K"},
           {"bench", "allreduce", "-f", "1"},
           {"bench", "allreduce", "--iters", "0"},
           {"bench", "allreduce", "--transport", "udp"},
           {"bench", "allreduce", "--timeout", "-1"},
           {"bench", "allreduce", "--algorithm", "tree"},
           {"bench", "allreduce", "--dtype", "int32", "--op", "avg"},
           {"bench", "reducescatter", "--dtype", "uint8", "--op", "avg"},
           {"bench", "allreduce", "--local-devices", "0"},
           {"bench", "allreduce", "--local-devices", "two"},
           {"bench", "allreduce", "--hierarchy", "tree"},
           {"bench", "allreduce", "--hierarchy", "none", "--local-devices", "2"},
           {"bench", "reducescatter", "--local-devices", "2"},
           {"bench", "reducescatter", "--hierarchy", "rs-ag"}}) {
    const Parsed p = parse(args);
    std::string joined;
    for (const std::string& arg : args) joined += arg + " ";
    EXPECT_FALSE(p.run) << joined;
    EXPECT_EQ(p.exit_code, 2) << joined;
  }
}

TEST(Cli, AvgIsFineForBroadcastOfIntegers) {  // broadcast does not reduce: --op is ignored
  EXPECT_TRUE(parse({"bench", "broadcast", "--dtype", "int32", "--op", "avg"}).run);
}

}  // namespace
}  // namespace ringd::launcher
