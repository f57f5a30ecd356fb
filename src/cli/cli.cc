#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/bench_command.h"
#include "cli/command_errors.h"
#include "cli/flag_checks.h"
#include "cli/output_file.h"
#include "cli/pod_commands.h"
#include "cli/ps_command.h"
#include "cli/replay_command.h"
#include "cli/train_command.h"
#include "cli/version.h"
#include "common/suggest.h"
#include "common/tunables.h"
#include "ringd/config.h"
#include "ringd/error.h"

namespace ringd::cli {
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

void add_bench_options(CLI::App* bench, runners::BenchConfig* config, BenchFlagText* text) {
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
      ->type_name("FILE")
      ->check(writable_output_file());
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
      ->check(seconds_check("--timeout"));
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
void validate(const runners::BenchConfig& config) {
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
  if (config.collective == runners::Collective::kReduceScatter &&
      runners::bench_is_hierarchical(config)) {
    throw CLI::ValidationError("--local-devices",
                               "reducescatter has no hierarchical form; use --local-devices 1 and "
                               "no --hierarchy");
  }
  if (runners::collective_reduces(config.collective) &&
      !reduce_op_supported(config.dtype, config.op)) {
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

// The commands `ringd --help` lists, for "did you mean" on a misspelt one.
const std::vector<std::string>& command_names() {
  static const std::vector<std::string> names = {"bench", "train",  "ps",     "agent",
                                                 "exec",  "launch", "status", "hostfile"};
  return names;
}

// Appends `text` wrapped at `width` columns, continuation lines indented by `indent`.
void append_wrapped(std::string* out, const std::string& text, size_t indent, size_t width) {
  size_t column = indent;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (column > indent && column + 1 + word.size() > width) {
      *out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (column > indent) {
      *out += ' ';
      ++column;
    }
    *out += word;
    column += word.size();
    start = end + 1;
  }
  *out += '\n';
}

}  // namespace

std::string format_environment_help(size_t width) {
  size_t name_width = 0;
  size_t default_width = 0;
  for (const TunableInfo& info : tunable_table()) {
    name_width = std::max(name_width, std::string(info.name).size());
    default_width = std::max(default_width, std::string(info.default_value).size());
  }
  const std::string title = "default";
  default_width = std::max(default_width, title.size());
  std::string out = "Environment variables (flags override them):\n";
  out += "  " + std::string("NAME") + std::string(name_width - 4 + 2, ' ') + title +
         std::string(default_width - title.size() + 2, ' ') + "MEANING\n";
  const size_t indent = 2 + name_width + 2 + default_width + 2;
  for (const TunableInfo& info : tunable_table()) {
    const std::string name = info.name;
    const std::string value = info.default_value;
    out += "  " + name + std::string(name_width - name.size() + 2, ' ') + value +
           std::string(default_width - value.size() + 2, ' ');
    append_wrapped(&out, info.description, indent, std::max(width, indent + 20));
  }
  return out;
}

std::string unknown_command_message(const std::string& word) {
  std::string message = "unknown command '" + word + "'";
  const std::string closest = closest_name(word, command_names());
  if (!closest.empty()) message += "; did you mean '" + closest + "'?";
  message += " (commands:";
  for (const std::string& name : command_names()) message += " " + name;
  return message + "; ringd --help)";
}

bool parse_command_line(int argc, const char* const* argv, CommandLine* command, int* exit_code) {
  CLI::App app{kDescription, "ringd"};
  app.set_version_flag(
      "--version", [] { return build_report(); },
      "print the version and the backends this build has (like horovodrun "
      "--check-build), and exit");
  app.add_flag_callback(
      "--help-env",
      [] {
        const std::string text = format_environment_help(100);
        std::fwrite(text.data(), 1, text.size(), stdout);
        throw CLI::Success();
      },
      "list the RINGD_* environment variables and exit");
  app.require_subcommand(1);
  app.footer("Run `ringd <command> --help` for a command's options.");
  // A flag given twice takes its last value (a wrapper's defaults, then the user's arguments);
  // the subcommands inherit this.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  // Listed for `ringd --help` only: run_command_line hands these to pod_commands.h first.
  app.add_subcommand("agent", "a pod's health/metrics endpoint and authenticated exec service");
  app.add_subcommand("exec", "run a command on another pod's agent (Open MPI's rsh agent)");
  app.add_subcommand("hostfile", "wait for every pod's agent, then write mpirun's hostfile");
  app.add_subcommand("launch", "pod 0: wait for the pods, run mpirun through their agents");
  app.add_subcommand("status", "pod 0: how `ringd launch` ended, or wait until it has");

  runners::BenchConfig& config = command->bench;
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
    config.collective = runners::parse_collective(text.collective);
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
  if (argc >= 2 && argv[1][0] != '-') {
    const std::vector<std::string>& names = command_names();
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      std::fprintf(stderr, "ringd: error: %s\n", unknown_command_message(argv[1]).c_str());
      return 2;
    }
  }
  if (is_replay_command(argc, argv)) return run_replay_command_line(argc, argv);
  if (is_train_command(argc, argv)) return run_train_command_line(argc, argv);
  if (is_pod_command(argc, argv)) return run_pod_command(argc, argv);
  if (is_ps_command(argc, argv)) return run_ps_command_line(argc, argv);
  CommandLine command;
  int exit_code = 0;
  if (!parse_command_line(argc, argv, &command, &exit_code)) return exit_code;

  job::Topology topology;
  try {
    tunables();  // a malformed RINGD_* variable is a usage error (exit 2) like a malformed flag
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

}  // namespace ringd::cli
