// What `ringd train` was asked to do, after flag parsing (train_command.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "job/topology.h"
#include "model/replay_schedule.h"
#include "ringd/engine.h"
#include "ringd/hierarchy.h"
#include "runners/train_ps_mode.h"

namespace ringd::runners {

enum class SyncMode { kAllreduce, kPs };
// mlp: --layers, trained on --data; replay: --profile, modeled compute (model/replay_model.h).
enum class ModelKind { kMlp, kReplay };
enum class LrScaling { kLinear, kNone };
enum class LrSchedule { kConstant, kCosine };

struct TrainConfig {
  SyncMode mode = SyncMode::kAllreduce;
  ModelKind model = ModelKind::kMlp;
  std::string layers = "784,256,10";
  // mlp: matrix products through "auto" (cuBLAS where this build has it and rank 0 sees a GPU),
  // "openblas" or "cublas" (model/gemm.h); rank 0's choice is the whole job's.
  std::string blas = "auto";
  std::string profile = "resnet50";
  double compute_ms = 0;  // replay: modeled backward compute per step (forward = half of it)
  model::ComputeSpread spread = model::ComputeSpread::kUniform;
  int64_t steps_per_epoch = 100;  // replay only (the MLP's is the data size / global batch)

  std::string data_dir;    // empty = model::kDefaultDataDir
  size_t train_limit = 0;  // first N training samples only (0 = all)
  size_t test_limit = 0;   // first N test samples only (0 = all)
  bool evaluate = true;    // test accuracy at each epoch's end (rank 0)

  int epochs = 3;
  int64_t max_steps = 0;         // stop after this global step (0 = after --epochs)
  size_t batch_size = 32;        // per worker; the global batch is batch_size x world size
  double learning_rate = 0.025;  // for one worker; see lr_scaling
  LrScaling lr_scaling = LrScaling::kLinear;  // linear: x world size (Goyal et al. 2017)
  int64_t warmup_steps = 100;                 // linear warm-up from lr/warmup to the scaled lr
  // After the warm-up: constant, or cosine (the scaled lr decays along half a cosine to 0 at the
  // end of the last epoch; Loshchilov & Hutter 2017, no restarts). --max-steps does not move it.
  LrSchedule lr_schedule = LrSchedule::kConstant;
  double momentum = 0.9;
  double weight_decay = 0;
  uint64_t seed = 42;

  std::string checkpoint_dir;    // empty = no checkpoints
  int64_t checkpoint_every = 0;  // steps between checkpoints (0 = only at the end)
  size_t keep_checkpoints = 3;   // newest files kept (0 = all)
  bool resume = false;

  std::string json_path;  // machine-readable summary (rank 0)
  // TensorBoard event files of the training curves (rank 0; runners/tensorboard_writer.h);
  // empty = none.
  std::string tensorboard_dir;
  std::string params_out;  // final parameters, raw float32 in registration order (rank 0)
  int64_t log_every = 50;  // progress line every N steps (rank 0)
  double throttle_ms = 0;  // sleep after every step (tests: a run long enough to kill)
  // --elastic (runners/elastic_train.h): ranks may be lost and join while the job goes on.
  bool elastic = false;
  int min_ranks = 1;
  int max_ranks = 0;
  int64_t elastic_check_every = 10;  // steps between the votes on whether a process waits to join

  // Gradient compression (allreduce mode): unset = RINGD_COMPRESSION. With kDgc the momentum
  // moves into the compressor and the optimizer runs plain SGD (include/ringd/dgc.h).
  std::optional<Compression> compression;
  double dgc_sparsity = 0.999;
  int dgc_warmup_epochs = 4;  // the paper's ramp 75% -> 93.75% -> 98.4% -> 99.6% (0 = none)
  std::optional<double> cycle_time_ms;  // fusion engine (allreduce mode)
  std::optional<size_t> fusion_threshold_bytes;
  PsTrainOptions ps;  // --mode ps (train_ps_mode.h)
  // > 1 (allreduce mode): each rank is a node of this many CPU devices, each training a replica
  // on its own share of the global batch; the engine runs over them (EngineOptions::local_group).
  int local_devices = 1;
  Hierarchy hierarchy = kDefaultHierarchy;
  // --gpus (CUDA builds with NCCL): the local devices are GPUs 0..L-1, even one. Replica d
  // multiplies on GPU d (cuBLAS, when the job's --blas is cublas) and the engine reduces the
  // gradients in GPU memory through an NCCL group; implies group_memory.
  bool gpus = false;
  // The gradients reach the engine in memory the local group allocated, copied there after
  // backward and back before the update (model/allreduce_sync.h): what --gpus needs, the MLP
  // keeping its tensors in host memory. Tests set it over CPU devices to run that path without a
  // GPU; needs local_devices > 1 there.
  bool group_memory = false;

  std::chrono::milliseconds timeout{0};
  std::string interface;
  int tcp_port = 0;
  job::TopologyFlags topology;
};

const char* sync_mode_name(SyncMode mode);    // "allreduce", "ps"
const char* model_kind_name(ModelKind kind);  // "mlp", "replay"

}  // namespace ringd::runners
