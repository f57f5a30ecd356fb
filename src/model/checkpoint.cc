#include "model/checkpoint.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <system_error>

#include "common/files.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "proto/checkpoint.pb.h"
#include "ringd/error.h"

namespace ringd::model {
namespace {

constexpr char kMagic[8] = {'R', 'I', 'N', 'G', 'D', 'C', 'K', 'P'};
constexpr size_t kFixedBytes = 8 + 4;  // magic + header length
constexpr size_t kDigestBytes = 32;
// A header longer than this is corruption: 64 MiB is a million tensor names.
constexpr uint32_t kMaxHeaderBytes = 64u << 20;

// Writes through `ops`, hashing what it writes; any failure throws kIo naming the final path.
class HashingWriter {
 public:
  HashingWriter(int fd, const std::string& final_path, const CheckpointFileOps& ops)
      : fd_(fd), final_path_(final_path), ops_(ops) {}

  void write(const void* data, size_t bytes, bool hash = true) {
    if (bytes == 0) return;  // an empty tensor: its data pointer may be null
    if (hash) sha_.update(data, bytes);
    const auto* cursor = static_cast<const uint8_t*>(data);
    while (bytes > 0) {
      const ssize_t wrote = ops_.write(fd_, cursor, std::min<size_t>(bytes, 1 << 30));
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote <= 0) fail(wrote < 0 ? errno : ENOSPC);
      cursor += wrote;
      bytes -= static_cast<size_t>(wrote);
    }
  }

  Sha256Digest digest() { return sha_.finish(); }

  [[noreturn]] void fail(int error) const {
    if (error == ENOSPC || error == EDQUOT) {
      RINGD_THROW(kIo, "no space left on the device writing checkpoint "
                           << final_path_ << " (" << std::strerror(error)
                           << "); the previous checkpoints are untouched; free space or point "
                              "--checkpoint-dir elsewhere");
    }
    RINGD_THROW(kIo, "cannot write checkpoint " << final_path_ << ": " << std::strerror(error)
                                                << "; the previous checkpoints are untouched");
  }

 private:
  int fd_;
  const std::string& final_path_;
  const CheckpointFileOps& ops_;
  Sha256 sha_;
};

void fsync_directory(const std::string& dir, const std::string& final_path) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    RINGD_THROW(kIo, "checkpoint " << final_path << " was written but its directory " << dir
                                   << " could not be synced: " << std::strerror(error));
  }
  ::close(fd);
}

checkpoint::TensorEntry* add_entry(
    google::protobuf::RepeatedPtrField<checkpoint::TensorEntry>* list, const ParameterView& p,
    uint64_t* offset) {
  checkpoint::TensorEntry* entry = list->Add();
  entry->set_name(p.name);
  for (int64_t d : p.shape) entry->add_shape(d);
  entry->set_offset(*offset);
  entry->set_count(p.count);
  *offset += p.count * sizeof(float);
  return entry;
}

[[noreturn]] void corrupt(const std::string& path, const std::string& why) {
  RINGD_THROW(kProtocol, "checkpoint " << path << " is not usable: " << why);
}

[[noreturn]] void not_regular(const std::string& path, mode_t mode) {
  corrupt(path, std::string("it is ") + file_kind(mode) +
                    ", not a regular file (checkpoints are read from regular files only)");
}

// A checkpoint opened for reading: a regular file, reached without following a symbolic link and
// opened without waiting (a FIFO, a device or a directory is refused before any read).
class CheckpointFile {
 public:
  explicit CheckpointFile(const std::string& path) : path_(path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      RINGD_THROW(kIo, "cannot open checkpoint " << path << ": " << std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) not_regular(path, st.st_mode);
    fd_ = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) {
      if (errno == ELOOP) not_regular(path, S_IFLNK);  // replaced since lstat
      RINGD_THROW(kIo, "cannot open checkpoint " << path << ": " << std::strerror(errno));
    }
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      not_regular(path, st.st_mode);
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~CheckpointFile() { ::close(fd_); }
  CheckpointFile(const CheckpointFile&) = delete;
  CheckpointFile& operator=(const CheckpointFile&) = delete;

  uint64_t size() const { return size_; }

  // Bytes [offset, offset + bytes); a file that shrank since it was opened is truncated.
  void read(uint64_t offset, void* into, size_t bytes) const {
    auto* cursor = static_cast<char*>(into);
    while (bytes > 0) {
      const ssize_t got =
          ::pread(fd_, cursor, std::min<size_t>(bytes, 1 << 30), static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        RINGD_THROW(kIo, "cannot read checkpoint " << path_ << ": " << std::strerror(errno));
      }
      if (got == 0) corrupt(path_, "it ended while being read (truncated)");
      cursor += got;
      offset += static_cast<uint64_t>(got);
      bytes -= static_cast<size_t>(got);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Reads and checks the fixed part and the header; the file's size must be the one the header
// describes, so nothing beyond it is ever read. Sets *length to the header's length.
checkpoint::Header read_header(const CheckpointFile& file, const std::string& path,
                               uint32_t* length) {
  const uint64_t size = file.size();
  if (size < kFixedBytes + kDigestBytes) {
    corrupt(path, "only " + std::to_string(size) + " bytes (truncated)");
  }
  uint8_t fixed[kFixedBytes];
  file.read(0, fixed, kFixedBytes);
  if (std::memcmp(fixed, kMagic, sizeof(kMagic)) != 0) {
    corrupt(path, "it does not start with RINGDCKP (not a ringd checkpoint)");
  }
  *length = uint32_t{fixed[8]} | (uint32_t{fixed[9]} << 8) | (uint32_t{fixed[10]} << 16) |
            (uint32_t{fixed[11]} << 24);
  if (*length > size - kFixedBytes - kDigestBytes || *length > kMaxHeaderBytes) {
    corrupt(path, "its header length " + std::to_string(*length) + " runs past the file");
  }
  std::string bytes(*length, '\0');
  file.read(kFixedBytes, bytes.data(), bytes.size());
  checkpoint::Header header;
  if (!header.ParseFromString(bytes)) corrupt(path, "its header does not parse");
  if (header.format_version() != kCheckpointFormatVersion) {
    corrupt(path, "format version " + std::to_string(header.format_version()) +
                      ", this ringd reads " + std::to_string(kCheckpointFormatVersion));
  }
  const uint64_t payload_bytes = size - kFixedBytes - *length - kDigestBytes;
  if (header.payload_bytes() != payload_bytes) {
    corrupt(path, "the header announces " + std::to_string(header.payload_bytes()) +
                      " payload bytes, the file holds " + std::to_string(payload_bytes) +
                      " (truncated, or not the file the header describes)");
  }
  return header;
}

CheckpointMeta meta_of(const checkpoint::Header& header) {
  CheckpointMeta meta;
  meta.model = header.model();
  meta.step = header.step();
  meta.epoch = header.epoch();
  meta.step_in_epoch = header.step_in_epoch();
  meta.seed = header.seed();
  meta.global_batch = header.global_batch();
  meta.world_size = header.world_size();
  meta.learning_rate = header.learning_rate();
  meta.momentum = header.momentum();
  meta.weight_decay = header.weight_decay();
  meta.wall_seconds = header.wall_seconds();
  meta.run_id = header.run_id();
  meta.written_unix_ns = header.written_unix_ns();
  return meta;
}

}  // namespace

std::string write_checkpoint(const std::string& dir, const CheckpointMeta& meta,
                             const std::vector<ParameterView>& params,
                             const std::vector<const float*>& momentum,
                             const CheckpointFileOps* ops) {
  RINGD_CHECK_ARG(momentum.empty() || momentum.size() == params.size(),
                  "checkpoint: " << momentum.size() << " momentum buffers for " << params.size()
                                 << " parameters");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    RINGD_THROW(kIo, "cannot create the checkpoint directory " << dir << ": " << ec.message());
  }
  const std::string final_path = checkpoint_path(dir, meta.step);
  const std::string temp_path =
      dir + "/.tmp-" + std::to_string(::getpid()) + "-" + final_path.substr(dir.size() + 1);
  // A name taken by something that is not a checkpoint file (a directory, a FIFO) is said as such
  // before anything is written; rename() would only say "Is a directory" after the whole write.
  struct stat taken {};
  if (::lstat(final_path.c_str(), &taken) == 0 && !S_ISREG(taken.st_mode)) {
    RINGD_THROW(kIo, "cannot write checkpoint "
                         << final_path << ": that name is taken by " << file_kind(taken.st_mode)
                         << ", not a checkpoint file; move it out of " << dir);
  }

  checkpoint::Header header;
  header.set_format_version(kCheckpointFormatVersion);
  header.set_model(meta.model);
  header.set_step(meta.step);
  header.set_epoch(meta.epoch);
  header.set_step_in_epoch(meta.step_in_epoch);
  header.set_seed(meta.seed);
  header.set_global_batch(meta.global_batch);
  header.set_world_size(meta.world_size);
  header.set_learning_rate(meta.learning_rate);
  header.set_momentum(meta.momentum);
  header.set_weight_decay(meta.weight_decay);
  header.set_wall_seconds(meta.wall_seconds);
  header.set_run_id(meta.run_id);
  header.set_written_unix_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
  uint64_t offset = 0;
  for (const ParameterView& p : params) add_entry(header.mutable_parameters(), p, &offset);
  if (!momentum.empty()) {
    for (const ParameterView& p : params) add_entry(header.mutable_momentum_buffers(), p, &offset);
  }
  header.set_payload_bytes(offset);
  const std::string header_bytes = header.SerializeAsString();
  const uint32_t length = static_cast<uint32_t>(header_bytes.size());
  const uint8_t length_le[4] = {static_cast<uint8_t>(length), static_cast<uint8_t>(length >> 8),
                                static_cast<uint8_t>(length >> 16),
                                static_cast<uint8_t>(length >> 24)};

  const int fd =
      ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    RINGD_THROW(kIo, "cannot create checkpoint file " << temp_path << ": " << std::strerror(errno));
  }
  // Held until the file is renamed or removed (closing releases it, and so does a kill): a locked
  // temporary is being written, an unlocked one is stale (remove_stale_temporaries). Where the
  // file system has no locks the write goes on unlocked.
  ::flock(fd, LOCK_EX);
  CheckpointFileOps default_ops{
      [](int file, const void* data, size_t bytes) { return ::write(file, data, bytes); }};
  bool open = true;
  try {
    HashingWriter out(fd, final_path, ops && ops->write ? *ops : default_ops);
    out.write(kMagic, sizeof(kMagic));
    out.write(length_le, sizeof(length_le));
    out.write(header_bytes.data(), header_bytes.size());
    for (const ParameterView& p : params) out.write(p.value, p.count * sizeof(float));
    for (size_t i = 0; i < momentum.size(); ++i) {
      out.write(momentum[i], params[i].count * sizeof(float));
    }
    const Sha256Digest digest = out.digest();
    out.write(digest.data(), digest.size(), /*hash=*/false);
    if (::fsync(fd) != 0) out.fail(errno);
    open = false;
    if (::close(fd) != 0) out.fail(errno);  // delayed write errors (NFS, quotas) show up here
  } catch (...) {
    if (open) ::close(fd);
    ::unlink(temp_path.c_str());
    throw;
  }
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp_path.c_str());
    RINGD_THROW(
        kIo, "cannot rename " << temp_path << " to " << final_path << ": " << std::strerror(error));
  }
  fsync_directory(dir, final_path);
  return final_path;
}

Checkpoint read_checkpoint(const std::string& path) {
  const CheckpointFile file(path);
  uint32_t length = 0;
  const checkpoint::Header header = read_header(file, path, &length);
  std::string bytes(file.size(), '\0');  // the size the header describes: nothing more is read
  file.read(0, bytes.data(), bytes.size());
  const Sha256Digest digest = sha256(bytes.data(), bytes.size() - kDigestBytes);
  if (std::memcmp(digest.data(), bytes.data() + bytes.size() - kDigestBytes, kDigestBytes) != 0) {
    corrupt(path, "its SHA-256 checksum does not match (corrupted or truncated)");
  }
  const uint64_t payload_bytes = header.payload_bytes();
  const char* payload = bytes.data() + kFixedBytes + length;
  auto tensor = [&](const checkpoint::TensorEntry& entry) {
    if (entry.offset() > payload_bytes || entry.count() > (payload_bytes - entry.offset()) / 4) {
      corrupt(path, "tensor " + entry.name() + " lies outside the payload");
    }
    uint64_t elements = 1;
    for (const int64_t extent : entry.shape()) {
      if (extent < 0 || (extent > 0 && elements > UINT64_MAX / static_cast<uint64_t>(extent))) {
        corrupt(path, "tensor " + entry.name() + " has an impossible shape");
      }
      elements *= static_cast<uint64_t>(extent);
    }
    if (elements != entry.count()) {
      corrupt(path, "tensor " + entry.name() + "'s shape holds " + std::to_string(elements) +
                        " values, its entry " + std::to_string(entry.count()));
    }
    CheckpointTensor t;
    t.name = entry.name();
    t.shape.assign(entry.shape().begin(), entry.shape().end());
    t.values.resize(entry.count());
    // An empty tensor (a zero extent) has no values, and its vector no buffer to copy into.
    if (entry.count() > 0) {
      std::memcpy(t.values.data(), payload + entry.offset(), entry.count() * sizeof(float));
    }
    return t;
  };
  Checkpoint checkpoint;
  checkpoint.path = path;
  checkpoint.meta = meta_of(header);
  for (const auto& entry : header.parameters()) checkpoint.parameters.push_back(tensor(entry));
  if (header.momentum_buffers_size() != 0 &&
      header.momentum_buffers_size() != header.parameters_size()) {
    corrupt(path, std::to_string(header.momentum_buffers_size()) + " momentum buffers for " +
                      std::to_string(header.parameters_size()) + " parameters");
  }
  for (int i = 0; i < header.momentum_buffers_size(); ++i) {
    const checkpoint::TensorEntry& entry = header.momentum_buffers(i);
    if (entry.count() != header.parameters(i).count()) {
      corrupt(path, "the momentum buffer of " + header.parameters(i).name() + " holds " +
                        std::to_string(entry.count()) + " values, the parameter " +
                        std::to_string(header.parameters(i).count()));
    }
    checkpoint.momentum.push_back(std::move(tensor(entry).values));
  }
  return checkpoint;
}

CheckpointMeta read_checkpoint_meta(const std::string& path) {
  const CheckpointFile file(path);
  uint32_t length = 0;
  return meta_of(read_header(file, path, &length));
}

std::string new_run_id() {
  std::random_device random;
  char text[33];
  for (int i = 0; i < 4; ++i) std::snprintf(text + 8 * i, 9, "%08x", random());
  return std::string(text, 32);
}

}  // namespace ringd::model
