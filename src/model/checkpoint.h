// `ringd train` checkpoints: one file per checkpoint, <dir>/ckpt-<step, 10 digits>.ringd, written
// by rank 0 every K steps and at the end.
//
//   offset 0        "RINGDCKP"                       8 bytes
//   8               header length H                  uint32, little-endian
//   12              header                           protobuf ringd.checkpoint.Header (H bytes)
//   12 + H          payload                          float32 tensors: every parameter, then
//                                                    every momentum buffer (the header's offsets)
//   end - 32        SHA-256 of everything before it
//
// Written atomically: a temporary file in the same directory, fsync, rename over the final name,
// fsync of the directory. A crash at any point leaves either the old set of checkpoints or the
// old set plus the complete new one. Reading checks the magic, the sizes and the checksum, so a
// truncated or corrupted file is refused (kProtocol naming it) and load_latest_checkpoint falls
// back to the previous one.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/parameter_sync.h"

namespace ringd::model {

constexpr uint32_t kCheckpointFormatVersion = 1;

struct CheckpointMeta {
  std::string model;          // Model::describe()
  int64_t step = 0;           // steps completed = the next step to run
  int64_t epoch = 0;          // epoch of the next step
  int64_t step_in_epoch = 0;  // its global batch within that epoch
  uint64_t seed = 0;
  int64_t global_batch = 0;
  int world_size = 0;
  double learning_rate = 0;
  double momentum = 0;
  double weight_decay = 0;
  double wall_seconds = 0;
};

struct CheckpointTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

struct Checkpoint {
  std::string path;
  CheckpointMeta meta;
  std::vector<CheckpointTensor> parameters;  // registration order
  std::vector<std::vector<float>> momentum;  // per parameter; empty = none saved
};

// How the writer reaches the file system; tests replace `write` to inject ENOSPC and short writes.
struct CheckpointFileOps {
  std::function<ssize_t(int fd, const void* data, size_t bytes)> write;
};

// <dir>/ckpt-0000000100.ringd
std::string checkpoint_path(const std::string& dir, int64_t step);

// Writes the checkpoint of `params` (and `momentum`: one buffer of params[i].count floats per
// parameter, or empty) atomically to checkpoint_path(dir, meta.step), creating `dir` if needed.
// Returns the path. On failure (kIo, naming the file and errno's reason: a full disk says so) the
// temporary file is removed and the existing checkpoints are untouched.
std::string write_checkpoint(const std::string& dir, const CheckpointMeta& meta,
                             const std::vector<ParameterView>& params,
                             const std::vector<const float*>& momentum,
                             const CheckpointFileOps* ops = nullptr);

// Reads and verifies one file; throws kProtocol (corrupt, truncated, foreign, other version) or
// kIo (unreadable), naming the file.
Checkpoint read_checkpoint(const std::string& path);

// The checkpoint files of `dir` (ckpt-*.ringd), newest step first.
std::vector<std::string> list_checkpoints(const std::string& dir);

// The newest checkpoint of `dir` that reads back intact. Each one that does not is skipped with a
// warning naming it and why. nullopt when there is none (or none intact).
std::optional<Checkpoint> load_latest_checkpoint(const std::string& dir);

// Deletes all but the newest `keep` checkpoint files of `dir` (keep 0 = keep all).
void prune_checkpoints(const std::string& dir, size_t keep);

}  // namespace ringd::model
