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
// Written atomically: a temporary file <dir>/.tmp-<pid>-ckpt-<step>.ringd, locked (flock) while it
// is written, fsync, rename over the final name, fsync of the directory. A crash at any point
// leaves either the old set of checkpoints or the old set plus the complete new one (and perhaps
// an unlocked temporary file, which remove_stale_temporaries deletes). Reading opens regular files
// only (no symbolic link is followed, no FIFO waited on, no device read), checks the magic, that
// the file's size is the one its header describes, and the checksum, so a truncated or corrupted
// file is refused (kProtocol naming it) and load_latest_checkpoint falls back to the previous one.
//
// Each header names the run that wrote it (run_id: random for a fresh run, inherited by a run
// resumed from one of its checkpoints) and when (written_unix_ns), so that pruning deletes only
// the run's own older files and --resume continues the run that wrote last.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
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
  std::string run_id;           // the run (and the runs resumed from it) that wrote the file
  int64_t written_unix_ns = 0;  // set by write_checkpoint; 0 in files of older ringd versions
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

// Reads and verifies one file; throws kProtocol (not a regular file, corrupt, truncated, foreign,
// other version) or kIo (unreadable), naming the file. Reads no more than the file's size, which
// must be the one its header describes.
Checkpoint read_checkpoint(const std::string& path);

// The header of one file, checked as read_checkpoint does except for the checksum (the payload is
// not read). Throws as read_checkpoint does.
CheckpointMeta read_checkpoint_meta(const std::string& path);

// 32 random hexadecimal digits: the run_id of a fresh run.
std::string new_run_id();

// The checkpoint files of `dir` (ckpt-*.ringd), newest step first.
std::vector<std::string> list_checkpoints(const std::string& dir);

// The intact checkpoint of `dir` written last (by its header's time; the higher step first among
// equal times, e.g. files of older ringd versions). Each file that does not read back intact is
// skipped with a warning naming it and why. nullopt when there is none (or none intact).
std::optional<Checkpoint> load_latest_checkpoint(const std::string& dir);

// Deletes the older checkpoints of one run: after each write of step S, the files of `dir` whose
// header carries `run_id` and whose step is at most S, beyond the newest `keep` of them (keep 0 =
// keep all), so the file just written always stays. Files of other runs, files that do not read
// as checkpoints and the run's own files beyond S (left before a resume, which found them
// unusable; the run overwrites them as it gets there) are neither counted nor deleted: each is
// named in a warning, once.
class CheckpointPruner {
 public:
  CheckpointPruner(std::string dir, std::string run_id, size_t keep);
  void prune(int64_t newest_step);

 private:
  void leave_alone(const std::string& path, const std::string& why);

  std::string dir_;
  std::string run_id_;
  size_t keep_;
  std::set<std::string> reported_;  // files already named in a warning
};

// Deletes the temporary files (.tmp-<pid>-ckpt-<step>.ringd) of `dir` that no process is writing
// (none holds their lock): what writes interrupted by a kill or a crash left. Logs a warning for
// each, with its size. Returns how many were removed.
size_t remove_stale_temporaries(const std::string& dir);

}  // namespace ringd::model
