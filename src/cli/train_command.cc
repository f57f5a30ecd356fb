#include "cli/train_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
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
#include "cli/stop_signal.h"
#include "common/logging.h"
#include "common/tunables.h"
#include "job/elastic_job.h"
#include "job/job_context.h"
#include "model/gemm.h"
#include "model/mlp.h"
#include "ringd/error.h"
#include "ringd/inproc.h"
#include "runners/elastic_train.h"
#include "runners/train_report.h"
#include "runners/train_runner.h"

namespace ringd::cli {
namespace {

constexpr const char* kFooter = R"(
Data order: each epoch visits the training set in a permutation drawn from (--seed, epoch); every
step takes the next global batch (--batch-size x ranks samples) and rank r trains on its r-th
slice, so N ranks compute exactly the averaged gradient of one rank with the whole global batch.
With --local-devices L each rank is a node of L CPU devices: device d of rank r trains a replica on
slice r x L + d of a global batch of --batch-size x ranks x L, and the engine averages the
gradients through the hierarchy (inside the node, then across nodes); the run matches N x L flat
ranks up to rounding (the sums are added in another order). With --gpus (CUDA builds with NCCL)
those devices are GPUs 0..L-1, even one: replica d multiplies on GPU d (--blas cublas or auto)
and the engine reduces the gradients in GPU memory through NCCL; the model keeps its tensors in
host memory, so each gradient is copied to its GPU and the average back, every step.

Learning rate: --lr is for one worker; with --lr-scaling linear (default) the rate is
--lr x ranks (the global batch grows with the ranks), reached by a linear warm-up over
--warmup-steps steps (from 1/warmup of it). --lr-scaling none keeps --lr.

Checkpoints (--checkpoint-dir): rank 0 writes <dir>/ckpt-<step>.ringd every --checkpoint-every
steps and at the end, atomically, with a SHA-256 checksum; --resume continues from the newest
intact one (corrupt or truncated files are skipped with a warning) and reaches the same
parameters as a run that never stopped.

TensorBoard (--tensorboard DIR): rank 0 writes DIR/events.out.tfevents.<time>.<host>.<pid>.ringd
with train/loss, train/accuracy, train/samples_per_s and train/communication_ratio at every
progress line and test/accuracy after each epoch; `tensorboard --logdir DIR` shows them.

Stopping: SIGTERM or SIGINT on any rank stops every rank after the same step (allreduce mode);
rank 0 writes a checkpoint of it and all exit 128+N (143 for SIGTERM). A second SIGINT ends the
process at once. When a step fails (a dead peer), rank 0 first writes a checkpoint of the last
completed step (allreduce mode), then exits 1.

Elastic (--elastic, tcp): no --rank/--size; every process runs the same line with --rendezvous
HOST:PORT (the process on HOST serves the store: the job ends if that one is lost) and the same
RINGD_JOB_ID or RINGD_JOB_SECRET. The processes form generation after generation of the job: when
a rank is lost the others go on without it within --timeout, taking no checkpoint and restarting
nothing; a process started later with the same line joins at the next vote (every
--elastic-check-every steps) and receives the parameters from a rank that has them. The global
batch is --batch-size x --max-ranks whatever the ranks, split evenly over them, and the learning
rate is scaled for --max-ranks: a lost rank's share is read by the others. Fewer than --min-ranks
wait, up to --timeout, then fail naming who came. Not elastic yet: checkpoints, --local-devices,
--gpus, DGC, --mode ps, the replay model.

Examples:
  ringd train --transport inproc --ranks 4 --epochs 3
  mpirun -np 4 --mca mpi_yield_when_idle 1 ringd train --checkpoint-dir /tmp/ckpt --json out.json
  ringd train --transport inproc --ranks 4 --model replay --profile vgg16 --compute-ms 100
  ringd train --transport inproc --ranks 2 --local-devices 2 --epochs 1   # 2 nodes x 2 devices
  mpirun -np 2 ringd train --local-devices 4 --gpus --blas cublas   # 2 nodes x 4 GPUs
  RINGD_JOB_ID=demo ringd train --elastic --max-ranks 4 --min-ranks 2 --rendezvous node-0:29400
)";

struct TrainFlagText {
  std::string mode = "allreduce";
  std::string model = "mlp";
  std::string hierarchy;
  std::string lr_scaling = "linear";
  std::string lr_schedule;  // "" = constant, or cosine with --compression dgc
  std::string spread = "uniform";
  std::string threshold;
  std::string timeout;
  std::string compression;
};

void add_train_options(CLI::App& app, runners::TrainConfig* config, TrainFlagText* text) {
  app.add_option("--mode", text->mode, "gradient exchange: allreduce (default) or ps")
      ->check(CLI::IsMember({"allreduce", "ps"}));
  app.add_option("--model", text->model, "mlp (default) or replay (a gradient profile)")
      ->check(CLI::IsMember({"mlp", "replay"}));
  app.add_option("--layers", config->layers, "MLP layer sizes, inputs first (default 784,256,10)")
      ->type_name("N,N,...");
  app.add_option("--blas", config->blas,
                 "MLP matrix products: auto (default: cublas where this build has cuBLAS and rank "
                 "0 sees a GPU, else openblas), openblas (CPU) or cublas (GPU); rank 0's choice is "
                 "the job's")
      ->check(CLI::IsMember({"auto", "openblas", "cublas"}));
  app.add_option("--profile", config->profile,
                 "replay: resnet50, vgg16, bert_base, inception_v3 or a .tsv file");
  app.add_option("--compute-ms", config->compute_ms,
                 "replay: modeled backward compute per step in ms; forward is half of it")
      ->check(finite_range(0.0, 1e7));
  app.add_option("--spread", text->spread, "replay: compute shared uniform (default) or by size")
      ->check(CLI::IsMember({"uniform", "size"}));
  app.add_option("--steps-per-epoch", config->steps_per_epoch, "replay: steps per epoch (100)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option(
         "--data", config->data_dir,
         std::string("directory of train-/t10k-{images-idx3,labels-idx1}-ubyte[.gz] (default ") +
             model::kDefaultDataDir + ")")
      ->type_name("DIR");
  app.add_option("--train-limit", config->train_limit, "use the first N training samples only")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--test-limit", config->test_limit, "use the first N test samples only")
      ->check(CLI::NonNegativeNumber);
  app.add_flag(
      "--no-eval", [config](int64_t) { config->evaluate = false; },
      "no test accuracy at the end of epochs");
  app.add_option("--epochs", config->epochs, "epochs (default 3)")->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-steps", config->max_steps, "stop after this many global steps")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--batch-size", config->batch_size, "samples per worker per step (default 32)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--lr", config->learning_rate, "learning rate for one worker (default 0.025)")
      ->check(finite_range(0.0, 1e3));
  app.add_option("--lr-scaling", text->lr_scaling, "linear (default: lr x ranks) or none")
      ->check(CLI::IsMember({"linear", "none"}));
  app.add_option("--lr-schedule", text->lr_schedule,
                 "after the warm-up: constant or cosine (decays along half a cosine to 0 at the "
                 "end of the last epoch); default constant, but cosine with --compression dgc "
                 "(DGC's paper decays the rate: with a constant one the MLP ends 2.4 points under "
                 "dense, with cosine within 0.5)")
      ->check(CLI::IsMember({"constant", "cosine"}));
  app.add_option("--warmup-steps", config->warmup_steps,
                 "linear learning-rate warm-up steps (default 100; 0 = none)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--momentum", config->momentum, "SGD momentum (default 0.9)")
      ->check(finite_range(0.0, 0.999999));
  app.add_option("--weight-decay", config->weight_decay, "L2 weight decay (default 0)")
      ->check(finite_range(0.0, 1.0));
  app.add_option("--seed", config->seed, "initialisation and data order (default 42)");
  app.add_option("--checkpoint-dir", config->checkpoint_dir, "rank 0 writes checkpoints here")
      ->type_name("DIR");
  app.add_option("--checkpoint-every", config->checkpoint_every,
                 "steps between checkpoints (default 0: only at the end)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--keep-checkpoints", config->keep_checkpoints,
                 "newest checkpoint files kept (default 3; 0 = all)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag(
      "--resume", config->resume,
      "continue from the newest intact checkpoint in --checkpoint-dir (none: from step 0)");
  app.add_option("--json", config->json_path, "write a JSON summary to FILE (rank 0)")
      ->type_name("FILE")
      ->check(writable_output_file());
  app.add_option("--tensorboard", config->tensorboard_dir,
                 "rank 0 writes TensorBoard event files (loss, accuracy, samples/s, communication "
                 "ratio) to DIR")
      ->type_name("DIR");
  app.add_option("--params-out", config->params_out,
                 "write the final parameters to FILE (raw float32, registration order; rank 0)")
      ->type_name("FILE")
      ->check(writable_output_file());
  app.add_option("--log-every", config->log_every, "progress line every N steps (default 50)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--throttle-ms", config->throttle_ms, "sleep after each step (for tests)")
      ->check(finite_range(0.0, 1e6))
      ->group("Testing");  // not hidden (group ""): CLI11 leaves a hidden flag's name out of errors
  app.add_option("--cycle-time-ms", config->cycle_time_ms,
                 "fusion engine cycle time (default RINGD_CYCLE_TIME_MS)")
      ->check(finite_range(0.0, 10000.0));
  app.add_option("--fusion-threshold", text->threshold,
                 "fusion buffer size (default RINGD_FUSION_THRESHOLD_BYTES)")
      ->type_name("SIZE");
  app.add_option("--compression", text->compression,
                 "gradient compression: none, fp16, bf16 or dgc (deep gradient compression: "
                 "--momentum moves into the compressor) (default RINGD_COMPRESSION)")
      ->check(CLI::IsMember({"none", "fp16", "bf16", "dgc"}));
  app.add_option("--dgc-sparsity", config->dgc_sparsity,
                 "dgc: share of each gradient not sent after the warm-up (default 0.999)")
      ->check(finite_range(0.0, 0.999999));
  app.add_option("--dgc-warmup-epochs", config->dgc_warmup_epochs,
                 "dgc: epochs of the sparsity ramp 75%, 93.75%, 98.4%, 99.6% (default 4; 0 = none)")
      ->check(CLI::Range(0, 64));
  add_local_device_options(app, &config->local_devices, &text->hierarchy);
  app.add_flag("--gpus", config->gpus,
               "the local devices are GPUs 0..L-1 through NCCL (CUDA builds), even one: replica d "
               "multiplies on GPU d, the gradients are reduced in GPU memory");
  add_job_options(app, &config->topology, &config->interface, &config->tcp_port, &text->timeout);
  runners::add_ps_train_options(app, &config->ps);
  app.add_flag("--elastic", config->elastic,
               "ranks may be lost and join while the job trains on (tcp; see Elastic below): "
               "needs --rendezvous and --max-ranks, no --rank/--size")
      ->group("Elastic");
  app.add_option("--min-ranks", config->min_ranks,
                 "--elastic: the fewest ranks the job trains with (default 1)")
      ->check(CLI::Range(1, 1 << 16))
      ->group("Elastic");
  app.add_option("--max-ranks", config->max_ranks,
                 "--elastic: the most ranks; the global batch is --batch-size x this")
      ->check(CLI::Range(1, 1 << 16))
      ->group("Elastic");
  app.add_option("--elastic-check-every", config->elastic_check_every,
                 "--elastic: steps between the votes that let a waiting process join (default "
                 "10)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->group("Elastic");
}

// --elastic's usage errors, before anything connects.
void check_elastic_flags(const runners::TrainConfig& config) {
  if (config.max_ranks < 1) {
    throw CLI::ValidationError("--elastic",
                               "needs --max-ranks N (the most ranks; the global batch is "
                               "--batch-size x N)");
  }
  if (config.min_ranks > config.max_ranks) {
    throw CLI::ValidationError("--min-ranks", std::to_string(config.min_ranks) +
                                                  " is more than --max-ranks " +
                                                  std::to_string(config.max_ranks));
  }
  if (config.topology.rendezvous.empty()) {
    throw CLI::ValidationError("--elastic",
                               "needs --rendezvous HOST:PORT, the same in every process (the "
                               "process on HOST serves it)");
  }
  if (config.topology.rank >= 0 || config.topology.size >= 0 || config.topology.inproc_ranks >= 0) {
    throw CLI::ValidationError("--elastic",
                               "takes no --rank, --size or --ranks: the rendezvous hands out "
                               "the ranks, and a process started later joins");
  }
  if (!config.topology.transport.empty() && config.topology.transport != "tcp") {
    throw CLI::ValidationError("--elastic",
                               "runs over --transport tcp only (MPI cannot lose a "
                               "rank), not " +
                                   config.topology.transport);
  }
  rendezvous::ElasticBounds bounds;
  bounds.min_ranks = config.min_ranks;
  bounds.max_ranks = config.max_ranks;
  try {
    runners::check_elastic_config(config, bounds);
  } catch (const Error& error) {
    throw CLI::ValidationError("--elastic", error.what());
  }
}

void write_params(const std::string& path, const std::vector<model::ParameterView>& params) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const model::ParameterView& p : params) {
    out.write(reinterpret_cast<const char*>(p.value),
              static_cast<std::streamsize>(p.count * sizeof(float)));
  }
  if (!out) {
    RINGD_THROW(kIo, "cannot write --params-out "
                         << path << "; check the directory exists and is writable");
  }
}

// A run stopped by a signal (SIGTERM from Kubernetes or mpirun) exits as a process killed by it
// would, 128 + N, on every rank: it did not finish, and `ringd launch` restarts it with --resume.
int exit_code_of(const runners::TrainSummary& summary) {
  return summary.stopped_by_signal != 0 ? 128 + summary.stopped_by_signal : 0;
}

int report(const runners::TrainSummary& summary, const runners::TrainConfig& config) {
  const std::string text = runners::format_train_summary(summary);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (!config.json_path.empty()) {
    std::ofstream out(config.json_path, std::ios::trunc);
    out << runners::format_train_json(summary) << "\n";
    if (!out) {
      RINGD_THROW(kIo, "cannot write --json " << config.json_path
                                              << "; check the directory exists and is writable");
    }
  }
  return exit_code_of(summary);
}

// --params-out: rank 0 writes the final parameters.
runners::TrainHooks params_out_hooks(const runners::TrainConfig& config) {
  runners::TrainHooks hooks;
  if (!config.params_out.empty()) {
    hooks.at_end = [&config](int rank, const std::vector<model::ParameterView>& params) {
      if (rank == 0) write_params(config.params_out, params);
    };
  }
  return hooks;
}

runners::TrainHooks rank0_hooks(const runners::TrainConfig& config) {
  runners::TrainHooks hooks = params_out_hooks(config);
  hooks.stop_requested = [](int) { return stop_signal_received(); };
  return hooks;
}

// --transport inproc: one thread per rank sharing one copy of the data.
int run_inproc(const runners::TrainConfig& config, int ranks) {
  const runners::TrainData data = runners::load_train_data(config, /*with_test=*/true);
  const runners::TrainHooks hooks = rank0_hooks(config);
  runners::TrainSummary summary;
  install_stop_signal_handlers();
  job::run_inproc_ranks(ranks, config.timeout, [&](Context& ctx, int rank) {
    runners::TrainSummary mine = runners::run_train_rank(ctx, config, data, hooks);
    if (rank == 0) summary = std::move(mine);
  });
  return report(summary, config);
}

// --elastic: this process's part of the job, the store served here when HOST is this machine
// (the first process there to bind the port), joined otherwise. The last generation's rank 0
// reports.
int run_elastic(const runners::TrainConfig& config) {
  job::ElasticProcess process =
      job::open_elastic_process(config.topology.rendezvous, config.min_ranks, config.max_ranks,
                                config.timeout, config.interface, config.tcp_port);
  const runners::TrainData data = runners::load_train_data(config, /*with_test=*/true);
  const runners::TrainSummary summary =
      runners::run_elastic_train(*process.job, config, data, params_out_hooks(config));
  return summary.final_rank == 0 ? report(summary, config) : 0;
}

int run_train(const runners::TrainConfig& config, const job::Topology& topology) {
  if (topology.transport == "inproc") return run_inproc(config, topology.size);
  set_log_rank(topology.rank);
  // Every rank reads the training data (each trains on its slice of every global batch); only
  // rank 0 evaluates, so only it reads the test set.
  const runners::TrainData data = runners::load_train_data(config, topology.rank == 0);
  job::JobConnectOptions options;
  options.timeout = config.timeout;
  options.interface = config.interface;
  options.tcp_port = config.tcp_port;
  options.mpi_from_other_thread = true;
  job::JobContext job = job::connect_job(topology, options);
  install_stop_signal_handlers();  // after MPI_Init (in connect_job under mpirun)
  // Co-located parameter servers authenticate with the job's secret (under mpirun without
  // RINGD_JOB_SECRET, the one rank 0 made: job_context.h).
  runners::TrainConfig job_config = config;
  job_config.ps.secret = job.secret;
  const runners::TrainSummary summary =
      runners::run_train_rank(*job.ctx, job_config, data, rank0_hooks(config));
  return topology.rank == 0 ? report(summary, config) : exit_code_of(summary);
}

}  // namespace

bool is_train_command(int argc, const char* const* argv) {
  return argc >= 2 && std::strcmp(argv[1], "train") == 0;
}

bool parse_train_command_line(int argc, const char* const* argv, runners::TrainConfig* config,
                              int* exit_code) {
  CLI::App app{
      "ringd train: data-parallel SGD of an MLP on MNIST-style data (or a replayed "
      "network), allreduce or parameter-server mode",
      "ringd train"};
  app.footer(kFooter);
  // A flag given twice takes its last value, so a wrapper's defaults can be overridden by the
  // arguments it passes on (scripts/demo.sh --epochs 2).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  TrainFlagText text;
  add_train_options(app, config, &text);
  const int code = parse_command_line(app, "ringd train", argc, argv, 2, [&] {
    config->mode = text.mode == "ps" ? runners::SyncMode::kPs : runners::SyncMode::kAllreduce;
    config->model = text.model == "replay" ? runners::ModelKind::kReplay : runners::ModelKind::kMlp;
    config->lr_scaling =
        text.lr_scaling == "none" ? runners::LrScaling::kNone : runners::LrScaling::kLinear;
    config->lr_schedule = text.lr_schedule == "cosine" ? runners::LrSchedule::kCosine
                                                       : runners::LrSchedule::kConstant;
    config->spread = model::parse_compute_spread(text.spread);
    if (!text.threshold.empty()) {
      config->fusion_threshold_bytes = parse_bytes("--fusion-threshold", text.threshold);
    }
    if (!text.timeout.empty()) config->timeout = parse_seconds("--timeout", text.timeout);
    if (!text.compression.empty()) {
      config->compression = parse_compression(text.compression);
      if (config->mode == runners::SyncMode::kPs) {
        throw CLI::ValidationError("--compression", "applies to --mode allreduce only");
      }
      // DGC with a constant rate lags dense training (its paper decays the rate); an explicit
      // --lr-schedule constant still wins.
      if (config->compression == Compression::kDgc && text.lr_schedule.empty()) {
        config->lr_schedule = runners::LrSchedule::kCosine;
      }
    }
    if (config->gpus) {
      check_gpus_flag(config->compression);
      if (config->mode == runners::SyncMode::kPs) {
        throw CLI::ValidationError("--gpus", "applies to --mode allreduce only");
      }
      if (config->blas == "openblas") {
        throw CLI::ValidationError("--gpus",
                                   "contradicts --blas openblas (the replicas multiply on their "
                                   "GPUs); use --blas cublas or auto");
      }
    }
    config->hierarchy = local_hierarchy(config->local_devices, text.hierarchy, config->compression,
                                        /*group_of_one=*/config->gpus);
    if (config->local_devices > 1 && config->mode == runners::SyncMode::kPs) {
      throw CLI::ValidationError("--local-devices",
                                 "applies to --mode allreduce only (parameter "
                                 "servers have no step inside the node)");
    }
    if (config->model == runners::ModelKind::kMlp) {
      const int ranks_here =
          (config->topology.transport == "inproc" ? std::max(1, config->topology.inproc_ranks)
                                                  : 1) *
          config->local_devices;
      model::check_mlp_fits_in_memory(model::parse_layer_sizes(config->layers), ranks_here);
      // --blas cublas where it cannot run is a usage error (exit 2), found before any connection.
      if (config->blas == "cublas") model::choose_gemm(config->blas);
    }
    if (config->resume && config->checkpoint_dir.empty()) {
      throw CLI::ValidationError("--resume", "needs --checkpoint-dir");
    }
    if (config->elastic) check_elastic_flags(*config);
  });
  *exit_code = code < 0 ? 0 : code;
  return code < 0;
}

int run_train_command_line(int argc, const char* const* argv) {
  runners::TrainConfig config;
  int exit_code = 0;
  if (!parse_train_command_line(argc, argv, &config, &exit_code)) return exit_code;
  if (config.elastic) return run_elastic_command([&] { return run_elastic(config); });
  return run_job_command(config.topology, nullptr, [&](const job::Topology& topology) {
    return run_train(config, topology);
  });
}

}  // namespace ringd::cli
