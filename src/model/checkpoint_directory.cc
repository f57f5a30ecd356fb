// The checkpoint directory (model/checkpoint.h): which files are checkpoints, which one --resume
// takes, which ones a run deletes, and the temporary files interrupted writes left.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "common/logging.h"
#include "model/checkpoint.h"
#include "ringd/error.h"

namespace ringd::model {
namespace {

constexpr const char* kPrefix = "ckpt-";
constexpr const char* kSuffix = ".ringd";
constexpr const char* kTemporaryPrefix = ".tmp-";

bool all_digits(const std::string& text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The step of a file named ckpt-<digits>.ringd, or -1.
int64_t step_of(const std::string& name) {
  const size_t prefix = std::strlen(kPrefix);
  const size_t suffix = std::strlen(kSuffix);
  if (name.size() <= prefix + suffix || name.compare(0, prefix, kPrefix) != 0 ||
      name.compare(name.size() - suffix, suffix, kSuffix) != 0) {
    return -1;
  }
  const std::string digits = name.substr(prefix, name.size() - prefix - suffix);
  if (digits.size() > 18 || !all_digits(digits)) return -1;
  return std::stoll(digits);
}

// write_checkpoint's temporary file names: .tmp-<pid>-ckpt-<step>.ringd.
bool is_temporary(const std::string& name) {
  const size_t prefix = std::strlen(kTemporaryPrefix);
  if (name.compare(0, prefix, kTemporaryPrefix) != 0) return false;
  const size_t dash = name.find('-', prefix);
  return dash != std::string::npos && all_digits(name.substr(prefix, dash - prefix)) &&
         step_of(name.substr(dash + 1)) >= 0;
}

// (step, path) of every checkpoint file of `dir`, newest step first.
std::vector<std::pair<int64_t, std::string>> checkpoints_by_step(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const int64_t step = step_of(it->path().filename().string());
    if (step >= 0) found.emplace_back(step, it->path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a > b; });
  return found;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof(name), "%s%010lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  return dir + "/" + name;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::string> paths;
  for (auto& [step, path] : checkpoints_by_step(dir)) paths.push_back(std::move(path));
  return paths;
}

std::optional<Checkpoint> load_latest_checkpoint(const std::string& dir) {
  // The headers first (small reads), to try the files in the order they were written.
  struct Candidate {
    int64_t written_unix_ns;
    std::string path;
  };
  std::vector<Candidate> candidates;
  for (const std::string& path : list_checkpoints(dir)) {
    try {
      candidates.push_back({read_checkpoint_meta(path).written_unix_ns, path});
    } catch (const Error& error) {
      RINGD_LOG(kWarn) << "skipping checkpoint " << path << ": " << error.what()
                       << "; trying the previous one";
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.written_unix_ns > b.written_unix_ns;
  });
  for (const Candidate& candidate : candidates) {
    try {
      return read_checkpoint(candidate.path);
    } catch (const Error& error) {
      RINGD_LOG(kWarn) << "skipping checkpoint " << candidate.path << ": " << error.what()
                       << "; trying the previous one";
    }
  }
  return std::nullopt;
}

CheckpointPruner::CheckpointPruner(std::string dir, std::string run_id, size_t keep)
    : dir_(std::move(dir)), run_id_(std::move(run_id)), keep_(keep) {
  RINGD_CHECK_ARG(!run_id_.empty(), "checkpoint pruning needs the run's id");
}

void CheckpointPruner::prune(int64_t newest_step) {
  if (keep_ == 0) return;
  size_t kept = 0;
  for (const auto& [step, path] : checkpoints_by_step(dir_)) {
    CheckpointMeta meta;
    try {
      meta = read_checkpoint_meta(path);
    } catch (const Error& error) {
      leave_alone(path, error.what());
      continue;
    }
    if (meta.run_id != run_id_) {
      leave_alone(path,
                  "written by another run (run id " +
                      (meta.run_id.empty() ? std::string("none: an older ringd") : meta.run_id) +
                      ", model " + meta.model + ", seed " + std::to_string(meta.seed) + ")");
      continue;
    }
    if (step > newest_step) {
      leave_alone(path, "this run's, but beyond step " + std::to_string(newest_step) +
                            ": left before the run resumed from an older one, to be overwritten");
      continue;
    }
    if (kept < keep_) {
      ++kept;
      continue;
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      RINGD_LOG(kWarn) << "cannot delete old checkpoint " << path << ": " << std::strerror(errno);
    }
  }
}

void CheckpointPruner::leave_alone(const std::string& path, const std::string& why) {
  if (!reported_.insert(path).second) return;
  RINGD_LOG(kWarn) << "checkpoint pruning neither counts nor deletes " << path << ": " << why
                   << "; this run keeps its own newest " << keep_ << " in " << dir_;
}

size_t remove_stale_temporaries(const std::string& dir) {
  size_t removed = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!is_temporary(it->path().filename().string())) continue;
    const std::string path = it->path().string();
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // not one of ours
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    // Unlocked: no process is writing it (a writer locks right after creating the file; only a
    // second run writing into the same directory at this moment could lose a file to us).
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      if (::unlink(path.c_str()) == 0) {
        ++removed;
        RINGD_LOG(kWarn) << "removed " << path << " (" << st.st_size
                         << " bytes): the temporary file of a checkpoint write that was "
                            "interrupted (killed or crashed)";
      } else {
        RINGD_LOG(kWarn) << "cannot remove the stale temporary checkpoint file " << path << ": "
                         << std::strerror(errno);
      }
    }
    ::close(fd);
  }
  return removed;
}

}  // namespace ringd::model
