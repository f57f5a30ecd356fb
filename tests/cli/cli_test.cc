// Flag parsing: values land in BenchConfig; bad flags exit 2, --help and --version exit 0.
#include "cli/cli.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli/output_file.h"
#include "cli/version.h"
#include "common/tunables.h"
#include "ringd/config.h"

namespace ringd::cli {
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
  const runners::BenchConfig& c = p.command.bench;
  EXPECT_EQ(c.collective, runners::Collective::kAllreduce);
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
  EXPECT_FALSE(runners::bench_is_hierarchical(c));
}

TEST(Cli, HierarchyFlags) {
  const Parsed explicit_choice = parse({"bench", "allreduce", "--local-devices", "4", "--hierarchy",
                                        "rs-ag", "--ranks", "4", "--transport", "inproc"});
  ASSERT_TRUE(explicit_choice.run);
  EXPECT_EQ(explicit_choice.command.bench.local_devices, 4);
  EXPECT_EQ(explicit_choice.command.bench.hierarchy, Hierarchy::kRsAg);
  EXPECT_TRUE(runners::bench_is_hierarchical(explicit_choice.command.bench));

  // Several devices and no --hierarchy: the measured default, named in --help.
  const Parsed defaulted = parse({"bench", "allgather", "--local-devices", "2"});
  ASSERT_TRUE(defaulted.run);
  EXPECT_EQ(defaulted.command.bench.hierarchy, kDefaultHierarchy);

  // One device with a hierarchy asked for: the hierarchical code path with trivial local steps.
  const Parsed one_device = parse({"bench", "broadcast", "--hierarchy", "reduce-bcast"});
  ASSERT_TRUE(one_device.run);
  EXPECT_EQ(one_device.command.bench.local_devices, 1);
  EXPECT_EQ(one_device.command.bench.hierarchy, Hierarchy::kReduceBcast);
  EXPECT_TRUE(runners::bench_is_hierarchical(one_device.command.bench));

  const Parsed flat = parse({"bench", "allreduce", "--hierarchy", "none", "--local-devices", "1"});
  ASSERT_TRUE(flat.run);
  EXPECT_FALSE(runners::bench_is_hierarchical(flat.command.bench));
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
  const runners::BenchConfig& c = p.command.bench;
  EXPECT_EQ(c.collective, runners::Collective::kReduceScatter);
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

TEST(Cli, AFlagGivenTwiceTakesItsLastValue) {  // a wrapper's defaults, then the user's flags
  const Parsed p = parse({"bench", "allreduce", "--iters", "5", "-b", "1K", "--iters", "7"});
  ASSERT_TRUE(p.run);
  EXPECT_EQ(p.command.bench.iters, 7);
}

TEST(Cli, AMisspeltCommandSuggestsTheRightOne) {
  EXPECT_EQ(unknown_command_message("tran"),
            "unknown command 'tran'; did you mean 'train'? (commands: bench train ps agent exec "
            "launch status hostfile; ringd --help)");
  EXPECT_NE(unknown_command_message("bnech").find("did you mean 'bench'?"), std::string::npos);
  EXPECT_EQ(unknown_command_message("kubectl").find("did you mean"), std::string::npos);
  // The whole command line: exit 2, nothing run.
  for (const char* word : {"tran", "help", "allreduce"}) {
    const char* argv[] = {"ringd", word};
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(run_command_line(2, argv), 2) << word;
    const std::string text = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(text.find(std::string("unknown command '") + word + "'"), std::string::npos) << text;
  }
}

TEST(Cli, HelpEnvKeepsItsColumnsWhateverTheNamesLength) {
  const std::string text = format_environment_help(100);
  size_t name_width = 0;
  for (const TunableInfo& info : tunable_table()) {
    name_width = std::max(name_width, std::string(info.name).size());
  }
  std::istringstream lines(text);
  std::string line;
  size_t rows = 0;
  size_t default_column = std::string::npos;
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), 100u) << line;
    if (line.rfind("  RINGD_", 0) != 0) continue;
    ++rows;
    // The default starts in the same column on every row, after the longest name and 2 spaces.
    const size_t column = line.find_first_not_of(' ', line.find(' ', 2));
    if (default_column == std::string::npos) default_column = column;
    EXPECT_EQ(column, default_column) << line;
    EXPECT_EQ(column, 2 + name_width + 2) << line;
  }
  EXPECT_EQ(rows, tunable_table().size());
  const std::size_t long_name = text.find("  RINGD_FUSION_MAX_TENSOR_BYTES  1M");
  EXPECT_NE(long_name, std::string::npos) << text;
}

TEST(Cli, AJsonPathThatCannotBeWrittenIsRefusedBeforeAnyWork) {
  for (const char* path : {"/nonexistent-ringd-dir/out.json", "/proc"}) {
    const Parsed p = parse({"bench", "allreduce", "--json", path});
    EXPECT_FALSE(p.run) << path;
    EXPECT_EQ(p.exit_code, 2) << path;
  }
  EXPECT_EQ(output_file_problem("/nonexistent-ringd-dir/out.json"),
            "directory /nonexistent-ringd-dir does not exist");
  EXPECT_EQ(output_file_problem("/proc"), "/proc is a directory");
  EXPECT_EQ(output_file_problem("/etc/passwd/x"), "cannot use /etc/passwd/x: Not a directory");
  const std::string fresh = ::testing::TempDir() + "ringd-cli-json-" + std::to_string(::getpid());
  EXPECT_EQ(output_file_problem(fresh), "");
  EXPECT_NE(access(fresh.c_str(), F_OK), 0) << "the check must not create the file";
  EXPECT_TRUE(parse({"bench", "allreduce", "--json", fresh}).run);
  EXPECT_EQ(output_file_problem("relative-name.json"), "");  // the working directory
}

// `ringd --version` says what this build has, each backend marked from the build's config.h.
TEST(Cli, VersionListsTheBackendsOfThisBuild) {
  const std::string report = build_report();
  EXPECT_EQ(report.rfind(std::string("ringd ") + version_string() + "\n", 0), 0u) << report;
  const auto mark = [](bool built, const std::string& name) {
    return std::string(built ? "[X] " : "[ ] ") + name;
  };
  for (const std::string& expected :
       {mark(true, "tcp"), mark(RINGD_HAVE_MPI, "mpi"), mark(RINGD_HAVE_IBVERBS, "ibverbs"),
        mark(RINGD_HAVE_NCCL, "NCCL (GPUs)"), mark(RINGD_HAVE_CUDA, "CUDA"),
        mark(RINGD_HAVE_CUBLAS, "cuBLAS"), mark(true, "OpenBLAS")}) {
    EXPECT_NE(report.find(expected), std::string::npos) << expected << " missing from\n" << report;
  }
  const char* argv[] = {"ringd", "--version"};
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_command_line(2, argv), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), report + "\n");
}

}  // namespace
}  // namespace ringd::cli
