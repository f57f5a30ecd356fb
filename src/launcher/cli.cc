#include "launcher/cli.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>

#include "common/tunables.h"
#include "launcher/bench_command.h"
#include "launcher/command_errors.h"
#include "launcher/pod_commands.h"
#include "launcher/ps_command.h"
#include "launcher/replay_command.h"
#include "launcher/train_command.h"
#include "launcher/version.h"
#include "ringd/config.h"
#include "ringd/error.h"

namespace ringd::launcher {
namespace {

constexpr const char* kDescription =
    "ringd: data-parallel allreduce over MPI, TCP or threads (Horovod-style, no parameter server).";

constexpr const char* kBenchFooter = R"(
Sizes take K, M, G suffixes (powers of 1024). For allgather and reducescatter the size is the
whole gathered/scattered buffer, as in nccl-tests. Output on rank 0 follows nccl-tests' layout:
time is the mean per iteration of the slowest rank; algbw = size/time; busbw = algbw x 2(n-1)/n
(allreduce), (n-1)/n (allgather, reducescatter) or 1 (broadcast).

Several devices per process (--local-devices L): this process is one node with L CPU devices
(host buffers), and the collective is hierarchical (--hierarchy reduce-bcast or rs-ag, default
reduce-bcast): inside the node, then across the nodes, then inside again. Device d of node r is
rank r*L+d, so sizes, --root and --check are those of a flat run of N*L ranks, and busbw counts
all N*L ranks (per device, comparable with that flat run). The extra column nodebw = algbw x
2(N-1)/N (allreduce; (N-1)/N allgather, 1 broadcast) is what each node's link carries each way
across nodes: compare it with the line rate. Hierarchical runs are always in place.

Finding the other ranks:
  under mpirun      rank and size come from Open MPI; the tcp transport bootstraps through MPI
                    (so does ibverbs: RDMA queue pairs, found through the same store;
                    RINGD_IB_DEVICE picks the adapter)
  standalone        ringd bench allreduce --rank R --size N --rendezvous HOST:PORT
                    (rank 0 serves the rendezvous store on HOST:PORT; set RINGD_JOB_SECRET)
  one process       ringd bench allreduce --transport inproc --ranks N   (N threads)

Examples:
  mpirun -np 4 --mca mpi_yield_when_idle 1 ringd bench allreduce --check
  ringd bench broadcast --transport inproc --ranks 3 -b 1K -e 1M --check --json out.jsonl
  ringd bench allreduce --transport inproc --ranks 4 --local-devices 4 --hierarchy rs-ag --check
)";

// A CLI11 validator built from one of ringd's parsers: the parser's message becomes the error.
template <typename Parse>
CLI::Validator parser_validator(const std::string& name, Parse parse) {
  return CLI::Validator(
      [name, parse](std::string& text) -> std::string {
        try {
          parse(name, text);
          return "";
        } catch (const Error& error) {
          return error.what();
        }
      },
      "", name);
}

// Flags kept as text until CLI11 is done, then parsed by ringd's own parsers (which also served
// as CLI11 validators, so by then they cannot fail).
struct BenchFlagText {
  std::string collective;
  std::string min_bytes = "4K";
  std::string max_bytes = "64M";
  std::string segment_bytes;
  std::string dtype = "float";
  std::string op = "sum";
  std::string algorithm = "auto";
  std::string timeout;
  std::string hierarchy;  // empty: reduce-bcast with several devices, none with one
};

void add_bench_options(CLI::App* bench, BenchConfig* config, BenchFlagText* text) {
  bench
      ->add_option("collective", text->collective,
                   "allreduce, broadcast, allgather or reducescatter")
      ->required()
      ->check(CLI::IsMember({"allreduce", "broadcast", "allgather", "reducescatter"}));
  const auto bytes = parser_validator(
      "size", [](const std::string& n, const std::string& t) { parse_bytes(n, t); });
  bench
      ->add_option("--transport", config->topology.transport,
                   "tcp, mpi, ibverbs or inproc (default: mpi under mpirun when built with MPI, "
                   "else tcp)")
      ->check(CLI::IsMember({"tcp", "mpi", "ibverbs", "inproc"}));
  bench->add_option("-b,--minbytes", text->min_bytes, "smallest size (default 4K)")
      ->check(bytes)
      ->type_name("SIZE");
  bench->add_option("-e,--maxbytes", text->max_bytes, "largest size (default 64M)")
      ->check(bytes)
      ->type_name("SIZE");
  bench
      ->add_option("-f,--stepfactor", config->step_factor,
                   "multiply the size by this each step (default 4)")
      ->check(CLI::Range(size_t{2}, size_t{1} << 20));
  bench->add_option("--iters", config->iters, "timed iterations per size (default 20)")
      ->check(CLI::Range(1, 1 << 30));
  bench->add_option("--warmup", config->warmup, "untimed iterations first (default 5)")
      ->check(CLI::Range(0, 1 << 30));
  bench
      ->add_option("--dtype", text->dtype,
                   "float double half bfloat16 int32 int64 uint8 (default float)")
      ->check(parser_validator("--dtype",
                               [](const std::string&, const std::string& t) { parse_dtype(t); }));
  bench->add_option("--op", text->op, "sum avg min max prod (default sum)")
      ->check(parser_validator(
          "--op", [](const std::string&, const std::string& t) { parse_reduce_op(t); }));
  bench->add_option("--root", config->root, "broadcast root (default 0)")
      ->check(CLI::NonNegativeNumber);
  bench->add_flag("--check", config->check,
                  "verify every element of a run after the timed iterations; #wrong counts "
                  "mismatches, and any makes the exit code 1");
  bench->add_option("--json", config->json_path, "append one JSON object per size to FILE")
      ->type_name("FILE");
  bench
      ->add_option("--algorithm", text->algorithm,
                   "allreduce algorithm: auto (by size), ring, rd (recursive doubling) or hd "
                   "(halving-doubling)")
      ->check(CLI::IsMember({"auto", "ring", "rd", "hd"}));
  bench
      ->add_option("--segment-bytes", text->segment_bytes,
                   "ring pipeline segment size (default RINGD_SEGMENT_BYTES)")
      ->check(bytes)
      ->type_name("SIZE");
  bench->add_flag("--in-place", config->in_place, "output buffer = input buffer");
  bench
      ->add_option("--timeout", text->timeout,
                   "seconds any wait may take (overrides RINGD_TIMEOUT)")
      ->type_name("SECONDS")
      ->check(parser_validator(
          "--timeout", [](const std::string& n, const std::string& t) { parse_seconds(n, t); }));
  bench
      ->add_option("--local-devices", config->local_devices,
                   "devices in this process (one node): GPUs when built with NCCL and the host "
                   "has enough, else CPU devices; > 1 makes the run hierarchical (default 1)")
      ->check(CLI::Range(1, 1024));
  bench
      ->add_option("--hierarchy", text->hierarchy,
                   "none, reduce-bcast or rs-ag (default: reduce-bcast with --local-devices > 1, "
                   "else none)")
      ->check(CLI::IsMember({"none", "reduce-bcast", "rs-ag"}));
  bench
      ->add_option("--ranks", config->topology.inproc_ranks,
                   "--transport inproc: number of ranks (threads in this process)")
      ->check(CLI::Range(1, 4096));
  bench->add_option("--rank", config->topology.rank, "this process's rank (without mpirun)")
      ->check(CLI::NonNegativeNumber);
  bench->add_option("--size", config->topology.size, "number of ranks (without mpirun)")
      ->check(CLI::Range(1, 1 << 20));
  bench
      ->add_option("--rendezvous", config->topology.rendezvous,
                   "HOST:PORT of rank 0's rendezvous store (without mpirun, tcp)")
      ->type_name("HOST:PORT");
  bench
      ->add_option("--iface", config->interface,
                   "tcp: listen on and advertise this interface's IPv4 address (default "
                   "RINGD_IFACE)")
      ->type_name("NAME");
  bench
      ->add_option("--tcp-port", config->tcp_port,
                   "tcp: this rank's listening port (default: any free port)")
      ->check(CLI::Range(0, 65535));
}

// Combinations CLI11's per-option checks cannot see.
void validate(const BenchConfig& config) {
  if (config.min_bytes > config.max_bytes) {
    throw CLI::ValidationError("--minbytes", "larger than --maxbytes (" +
                                                 std::to_string(config.min_bytes) + " > " +
                                                 std::to_string(config.max_bytes) + ")");
  }
  if (config.hierarchy == Hierarchy::kNone && config.local_devices > 1) {
    throw CLI::ValidationError("--hierarchy",
                               "none has no step inside the node, so it needs --local-devices 1; "
                               "run N*L ranks for a flat ring, or choose reduce-bcast or rs-ag");
  }
  if (config.collective == Collective::kReduceScatter && bench_is_hierarchical(config)) {
    throw CLI::ValidationError("--local-devices",
                               "reducescatter has no hierarchical form; use --local-devices 1 and "
                               "no --hierarchy");
  }
  if (collective_reduces(config.collective) && !reduce_op_supported(config.dtype, config.op)) {
    throw CLI::ValidationError("--op", std::string(reduce_op_name(config.op)) +
                                           " is defined for floating-point types only, not " +
                                           dtype_name(config.dtype));
  }
}

AllreduceAlgorithm algorithm_from_name(const std::string& name) {
  if (name == "ring") return AllreduceAlgorithm::kRing;
  if (name == "rd") return AllreduceAlgorithm::kRecursiveDoubling;
  if (name == "hd") return AllreduceAlgorithm::kHalvingDoubling;
  return AllreduceAlgorithm::kAuto;
}

void print_environment_help() {
  std::printf("Environment variables (flags override them):\n");
  for (const TunableInfo& info : tunable_table()) {
    std::printf("  %-28s default %-8s %s\n", info.name, info.default_value, info.description);
  }
}

}  // namespace

bool parse_command_line(int argc, const char* const* argv, CommandLine* command, int* exit_code) {
  CLI::App app{kDescription, "ringd"};
  app.set_version_flag("--version", std::string("ringd ") + version_string());
  app.add_flag_callback(
      "--help-env",
      [] {
        print_environment_help();
        throw CLI::Success();
      },
      "list the RINGD_* environment variables and exit");
  app.require_subcommand(1);
  app.footer("Run `ringd <command> --help` for a command's options.");
  // Listed for `ringd --help` only: run_command_line hands these to pod_commands.h first.
  app.add_subcommand("agent", "a pod's health/metrics endpoint and authenticated exec service");
  app.add_subcommand("exec", "run a command on another pod's agent (Open MPI's rsh agent)");
  app.add_subcommand("hostfile", "wait for every pod's agent, then write mpirun's hostfile");
  app.add_subcommand("launch", "pod 0: wait for the pods, run mpirun through their agents");

  BenchConfig& config = command->bench;
  BenchFlagText text;
  CLI::App* bench =
      app.add_subcommand("bench", "measure a collective over a sweep of sizes (nccl-tests style)");
  bench->footer(kBenchFooter);
  add_bench_options(bench, &config, &text);
  // Listed for `ringd --help` only: run_command_line hands "ps" to ps_command.cc first.
  app.add_subcommand("ps", "a parameter server for `ringd train --mode ps`; `ringd ps --help`");
  // Listed for `ringd --help` only: run_command_line hands "train" to train_command.cc first.
  app.add_subcommand("train", "data-parallel training (MLP or replay); `ringd train --help`");

  try {
    app.parse(argc, argv);
    config.collective = parse_collective(text.collective);
    config.min_bytes = parse_bytes("--minbytes", text.min_bytes);
    config.max_bytes = parse_bytes("--maxbytes", text.max_bytes);
    if (!text.segment_bytes.empty()) {
      config.segment_bytes = parse_bytes("--segment-bytes", text.segment_bytes);
    }
    if (!text.timeout.empty()) config.timeout = parse_seconds("--timeout", text.timeout);
    config.dtype = parse_dtype(text.dtype);
    config.op = parse_reduce_op(text.op);
    config.algorithm = algorithm_from_name(text.algorithm);
    config.hierarchy = !text.hierarchy.empty()    ? parse_hierarchy(text.hierarchy)
                       : config.local_devices > 1 ? kDefaultHierarchy
                                                  : Hierarchy::kNone;
    validate(config);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    *exit_code = code == 0 ? 0 : 2;
    return false;
  }
  command->command = CommandLine::Command::kBench;
  return true;
}

int run_command_line(int argc, const char* const* argv) {
  if (is_replay_command(argc, argv)) return run_replay_command_line(argc, argv);
  if (is_train_command(argc, argv)) return run_train_command_line(argc, argv);
  if (is_pod_command(argc, argv)) return run_pod_command(argc, argv);
  if (is_ps_command(argc, argv)) return run_ps_command_line(argc, argv);
  CommandLine command;
  int exit_code = 0;
  if (!parse_command_line(argc, argv, &command, &exit_code)) return exit_code;

  Topology topology;
  try {
    topology = plan_bench(command.bench);
  } catch (const std::exception& error) {
    print_error(error);
    return 2;
  }
  try {
    return run_bench(command.bench, topology);
  } catch (const std::exception& error) {
    print_error(error);
    abort_mpi_job_if_running(1);
    return 1;
  }
}

}  // namespace ringd::launcher
