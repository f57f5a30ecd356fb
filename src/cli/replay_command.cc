#include "cli/replay_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "cli/command_errors.h"
#include "cli/flag_checks.h"
#include "cli/job_flags.h"
#include "cli/output_file.h"
#include "common/tunables.h"
#include "job/job_context.h"
#include "ringd/error.h"
#include "ringd/inproc.h"
#include "runners/replay_runner.h"

namespace ringd::cli {
namespace {

constexpr const char* kFooter = R"(
Each step emits the profile's gradients (float32) in reverse registration order, one after each
share of --compute-ms of modeled backward compute (sleeping: GPU time does not use the CPU), through
the fusion engine, and waits for all of them. Reported (rank 0): the step time of the slowest rank;
the ideal max(compute, one allreduce of every gradient byte in one buffer, best of 3); scaling
efficiency = compute-only step / measured step; gradient bytes per second; and the negotiation time
per step, each cycle counted at its fastest rank (which waited for nobody). With --paired every
step (warm-up ones too) is preceded by one allreduce of all its bytes as ONE tensor through the
engine (in place, uncompressed: the one-buffer allreduce plus one negotiation cycle), and the
report adds the medians of those, of the steps, and of each step over its own one-buffer time:
on a shared host whose speed drifts by tens of percent, both sides of a pair see the same host.

Built-in profiles: resnet50 vgg16 bert_base inception_v3 (or a .tsv file: name<TAB>elements).
Fusion threshold, cycle time, cache capacity and compression default to RINGD_* (ringd --help-env).
With --compression dgc each rank's gradients are fresh pseudo-random values every step (DGC's
selection depends on them; written before the step's clock starts), --check verifies that every
rank got the same bits, and the report adds the bytes each rank sent against the payload.
With --local-devices L each rank is a node of L CPU devices (global rank = node x L + device), each
with its own gradients; the engine runs every bucket through the hierarchy, and the one-buffer
figure is the hierarchical allreduce of the same bytes over the same devices. With --gpus those
devices are GPUs 0..L-1 (an NCCL group, gradients in GPU memory; CUDA builds with NCCL): the
engine runs over the group even with --local-devices 1, its buckets member by member on the
gradients' own GPU buffers, uncompressed, the step across nodes staged through pinned memory.

Examples:
  ringd bench replay --transport inproc --ranks 4 --profile resnet50 --compute-ms 100 --steps 10
  ringd bench replay --transport inproc --ranks 4 --compute-ms 0 --no-fusion   # tensor by tensor
  ringd bench replay --transport inproc --ranks 2 --local-devices 4 --check    # 2 nodes x 4 devices
  ringd bench replay --transport inproc --ranks 2 --local-devices 1 --gpus --check  # GPU 0, 2 nodes
  mpirun -np 4 --mca mpi_yield_when_idle 1 ringd bench replay --transport tcp --compute-ms 80
)";

struct ReplayFlagText {
  std::string spread = "uniform";
  std::string op = "avg";
  std::string threshold;
  std::string max_tensor;
  std::string compression;
  std::string timeout;
  std::string hierarchy;
};

void add_replay_options(CLI::App& app, runners::ReplayConfig* config, ReplayFlagText* text) {
  app.add_option("--profile", config->profile,
                 "resnet50, vgg16, bert_base, inception_v3, or a .tsv file (default resnet50)");
  app.add_option("--compute-ms", config->compute_ms,
                 "modeled backward compute per step in ms (default 0: communication only)")
      ->check(finite_range(0.0, 1e7));
  app.add_option("--steps", config->steps, "timed steps (default 10)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--warmup-steps", config->warmup_steps,
                 "untimed steps first; the first fills the response cache (default 2)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--spread", text->spread,
                 "how the compute is shared among gradients: uniform (default) or size")
      ->check(CLI::IsMember({"uniform", "size"}));
  app.add_option("--op", text->op, "avg (default) or sum")->check(CLI::IsMember({"avg", "sum"}));
  app.add_flag(
      "--no-fusion", [config](int64_t) { config->fusion = false; },
      "run every tensor on its own (fusion threshold 0)");
  app.add_option("--fusion-threshold", text->threshold,
                 "fusion buffer size (default RINGD_FUSION_THRESHOLD_BYTES)")
      ->type_name("SIZE");
  app.add_option("--fusion-max-tensor", text->max_tensor,
                 "larger tensors run alone, unfused (default RINGD_FUSION_MAX_TENSOR_BYTES; 0 = "
                 "fuse any size)")
      ->type_name("SIZE");
  app.add_flag(
      "--no-cache", [config](int64_t) { config->cache = false; },
      "no response cache: every tensor asks rank 0 every step");
  app.add_option("--cycle-time-ms", config->cycle_time_ms,
                 "negotiation cycle time (default RINGD_CYCLE_TIME_MS)")
      ->check(finite_range(0.0, 10000.0));
  app.add_option("--compression", text->compression,
                 "gradient compression: none, fp16, bf16 or dgc (deep gradient compression, at "
                 "its steady-state sparsity: no warm-up)")
      ->check(CLI::IsMember({"none", "fp16", "bf16", "dgc"}));
  app.add_option("--dgc-sparsity", config->dgc_sparsity,
                 "dgc: share of each gradient not sent (default 0.999)")
      ->check(finite_range(0.0, 0.999999));
  app.add_option("--timeline", config->timeline,
                 "Chrome-trace timeline file (default RINGD_TIMELINE; %r = rank)")
      ->type_name("FILE");
  app.add_flag("--check", config->check,
               "verify every gradient of the last step; wrong values make the exit code 1");
  app.add_option("--json", config->json_path, "append one JSON object with the results to FILE")
      ->type_name("FILE")
      ->check(writable_output_file());
  app.add_option("--baseline-iters", config->baseline_iters,
                 "timed one-buffer allreduces for the ideal (default 3)")
      ->check(CLI::Range(1, 1000));
  app.add_flag("--paired", config->paired,
               "before every step, time one allreduce of all its bytes in one buffer through the "
               "engine, and report each step against its own (medians): robust to a host whose "
               "speed drifts");
  add_local_device_options(app, &config->local_devices, &text->hierarchy);
  app.add_flag("--gpus", config->gpus,
               "the local devices are GPUs 0..L-1 through NCCL (CUDA builds), even one: gradients "
               "in GPU memory, the engine over the GPU group; uncompressed only");
  add_job_options(app, &config->topology, &config->interface, &config->tcp_port, &text->timeout);
}

int report(const runners::ReplaySummary& summary, const runners::ReplayConfig& config) {
  const std::string text = runners::format_replay_text(summary);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (!config.json_path.empty()) {
    std::ofstream out(config.json_path, std::ios::app);
    out << runners::format_replay_json(summary) << "\n";
    if (!out) {
      RINGD_THROW(kIo, "cannot append to --json "
                           << config.json_path << "; check the directory exists and is writable");
    }
  }
  if (summary.wrong > 0) {
    std::fprintf(stderr, "ringd: error: --check found %lld wrong values\n",
                 static_cast<long long>(summary.wrong));
    return 1;
  }
  return 0;
}

int run_inproc(const runners::ReplayConfig& config, const model::GradientProfile& profile,
               int ranks) {
  runners::ReplaySummary summary;
  job::run_inproc_ranks(ranks, config.timeout, [&](Context& ctx, int rank) {
    runners::ReplaySummary mine = runners::run_replay_rank(ctx, config, profile);
    if (rank == 0) summary = std::move(mine);
  });
  return report(summary, config);
}

int run_replay(const runners::ReplayConfig& config, const job::Topology& topology) {
  const model::GradientProfile profile = model::load_gradient_profile(config.profile);
  if (topology.transport == "inproc") return run_inproc(config, profile, topology.size);
  job::JobConnectOptions options;
  options.timeout = config.timeout;
  options.interface = config.interface;
  options.tcp_port = config.tcp_port;
  options.mpi_from_other_thread = true;
  job::JobContext job = job::connect_job(topology, options);
  const runners::ReplaySummary summary = runners::run_replay_rank(*job.ctx, config, profile);
  return topology.rank == 0 ? report(summary, config) : (summary.wrong > 0 ? 1 : 0);
}

}  // namespace

bool is_replay_command(int argc, const char* const* argv) {
  return argc >= 3 && std::strcmp(argv[1], "bench") == 0 && std::strcmp(argv[2], "replay") == 0;
}

bool parse_replay_command_line(int argc, const char* const* argv, runners::ReplayConfig* config,
                               int* exit_code) {
  CLI::App app{"ringd bench replay: a network's gradients through the fusion engine",
               "ringd bench replay"};
  app.footer(kFooter);
  // A flag given twice takes its last value (a wrapper's defaults, then the user's arguments).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  ReplayFlagText text;
  add_replay_options(app, config, &text);
  const int code = parse_command_line(app, "ringd bench replay", argc, argv, 3, [&] {
    config->spread = model::parse_compute_spread(text.spread);
    config->op = parse_reduce_op(text.op);
    if (!text.threshold.empty()) {
      config->fusion_threshold_bytes = parse_bytes("--fusion-threshold", text.threshold);
    }
    if (!text.max_tensor.empty()) {
      config->fusion_max_tensor_bytes = parse_bytes("--fusion-max-tensor", text.max_tensor);
    }
    if (!text.compression.empty()) config->compression = parse_compression(text.compression);
    if (!text.timeout.empty()) config->timeout = parse_seconds("--timeout", text.timeout);
    if (!config->fusion && config->fusion_threshold_bytes) {
      throw CLI::ValidationError("--fusion-threshold", "contradicts --no-fusion");
    }
    if (config->gpus) check_gpus_flag(config->compression);
    config->hierarchy = local_hierarchy(config->local_devices, text.hierarchy, config->compression,
                                        /*group_of_one=*/config->gpus);
  });
  *exit_code = code < 0 ? 0 : code;
  return code < 0;
}

int run_replay_command_line(int argc, const char* const* argv) {
  runners::ReplayConfig config;
  int exit_code = 0;
  if (!parse_replay_command_line(argc, argv, &config, &exit_code)) return exit_code;
  return run_job_command(
      config.topology,
      // A bad --profile is a command-line error.
      [&] { model::load_gradient_profile(config.profile); },
      [&](const job::Topology& topology) { return run_replay(config, topology); });
}

}  // namespace ringd::cli
