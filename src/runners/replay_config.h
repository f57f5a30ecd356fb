// What `ringd bench replay` was asked to do, after flag parsing (replay_command.cc).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "job/topology.h"
#include "model/replay_schedule.h"
#include "ringd/engine.h"
#include "ringd/hierarchy.h"
#include "ringd/types.h"

namespace ringd::runners {

struct ReplayConfig {
  std::string profile = "resnet50";  // built-in name or a .tsv path
  double compute_ms = 0;             // modeled backward compute per step
  model::ComputeSpread spread = model::ComputeSpread::kUniform;
  int steps = 10;          // timed steps
  int warmup_steps = 2;    // untimed steps first (the first one fills the response cache)
  int baseline_iters = 3;  // timed one-buffer allreduces for the ideal
  // Before every step (warm-up ones too), one allreduce of all the gradient bytes in one buffer
  // through the engine, timed; each step is then compared with its own (ReplayStep::one_buffer_ms).
  bool paired = false;
  ReduceOp op = ReduceOp::kAvg;
  bool fusion = true;                             // --no-fusion: every tensor on its own
  std::optional<size_t> fusion_threshold_bytes;   // unset = RINGD_FUSION_THRESHOLD_BYTES
  std::optional<size_t> fusion_max_tensor_bytes;  // unset = RINGD_FUSION_MAX_TENSOR_BYTES
  bool cache = true;                              // --no-cache: every tensor asks rank 0
  std::optional<double> cycle_time_ms;            // unset = RINGD_CYCLE_TIME_MS
  std::optional<Compression> compression;         // unset = RINGD_COMPRESSION
  double dgc_sparsity = 0.999;                    // --compression dgc (no warm-up: steady state)
  std::string timeline;                           // unset = RINGD_TIMELINE
  bool check = false;                             // verify every gradient of the last step
  std::string json_path;                          // append one JSON object per run
  int local_devices = 1;                          // > 1: the engine over a node's CPU devices
  // --gpus: the local devices are GPUs 0..L-1 (an NCCL group; gradients in GPU memory); the
  // engine runs over the group even with one device per node. Uncompressed only.
  bool gpus = false;
  Hierarchy hierarchy = kDefaultHierarchy;  // when over_group()
  // The engine runs over a local group (and its buckets through the hierarchy).
  bool over_group() const { return local_devices > 1 || gpus; }
  std::chrono::milliseconds timeout{0};
  std::string interface;
  int tcp_port = 0;
  job::TopologyFlags topology;
};

}  // namespace ringd::runners
