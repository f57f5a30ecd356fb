#include "model/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "common/logging.h"
#include "common/sha256.h"
#include "proto/checkpoint.pb.h"
#include "ringd/error.h"

namespace ringd::model {
namespace {

constexpr char kMagic[8] = {'R', 'I', 'N', 'G', 'D', 'C', 'K', 'P'};
constexpr size_t kFixedBytes = 8 + 4;  // magic + header length
constexpr size_t kDigestBytes = 32;
constexpr const char* kPrefix = "ckpt-";
constexpr const char* kSuffix = ".ringd";

// The step of a file named ckpt-<digits>.ringd, or -1.
int64_t step_of(const std::string& name) {
  const size_t prefix = std::strlen(kPrefix);
  const size_t suffix = std::strlen(kSuffix);
  if (name.size() <= prefix + suffix || name.compare(0, prefix, kPrefix) != 0 ||
      name.compare(name.size() - suffix, suffix, kSuffix) != 0) {
    return -1;
  }
  const std::string digits = name.substr(prefix, name.size() - prefix - suffix);
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  return std::stoll(digits);
}

// Writes through `ops`, hashing what it writes; any failure throws kIo naming the final path.
class HashingWriter {
 public:
  HashingWriter(int fd, const std::string& final_path, const CheckpointFileOps& ops)
      : fd_(fd), final_path_(final_path), ops_(ops) {}

  void write(const void* data, size_t bytes, bool hash = true) {
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

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof(name), "%s%010lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  return dir + "/" + name;
}

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

  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    RINGD_THROW(kIo, "cannot create checkpoint file " << temp_path << ": " << std::strerror(errno));
  }
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
  std::ifstream in(path, std::ios::binary);
  if (!in) RINGD_THROW(kIo, "cannot open checkpoint " << path << ": " << std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) RINGD_THROW(kIo, "cannot read checkpoint " << path);
  if (bytes.size() < kFixedBytes + kDigestBytes) {
    corrupt(path, "only " + std::to_string(bytes.size()) + " bytes (truncated)");
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    corrupt(path, "it does not start with RINGDCKP (not a ringd checkpoint)");
  }
  const Sha256Digest digest = sha256(bytes.data(), bytes.size() - kDigestBytes);
  if (std::memcmp(digest.data(), bytes.data() + bytes.size() - kDigestBytes, kDigestBytes) != 0) {
    corrupt(path, "its SHA-256 checksum does not match (corrupted or truncated)");
  }
  const auto* length_le = reinterpret_cast<const uint8_t*>(bytes.data() + 8);
  const uint32_t length = uint32_t{length_le[0]} | (uint32_t{length_le[1]} << 8) |
                          (uint32_t{length_le[2]} << 16) | (uint32_t{length_le[3]} << 24);
  if (length > bytes.size() - kFixedBytes - kDigestBytes) {
    corrupt(path, "its header length " + std::to_string(length) + " runs past the file");
  }
  checkpoint::Header header;
  if (!header.ParseFromArray(bytes.data() + kFixedBytes, static_cast<int>(length))) {
    corrupt(path, "its header does not parse");
  }
  if (header.format_version() != kCheckpointFormatVersion) {
    corrupt(path, "format version " + std::to_string(header.format_version()) +
                      ", this ringd reads " + std::to_string(kCheckpointFormatVersion));
  }
  const size_t payload_bytes = bytes.size() - kFixedBytes - length - kDigestBytes;
  if (header.payload_bytes() != payload_bytes) {
    corrupt(path, "the header announces " + std::to_string(header.payload_bytes()) +
                      " payload bytes, the file holds " + std::to_string(payload_bytes));
  }
  const char* payload = bytes.data() + kFixedBytes + length;
  auto tensor = [&](const checkpoint::TensorEntry& entry) {
    if (entry.offset() > payload_bytes || entry.count() > (payload_bytes - entry.offset()) / 4) {
      corrupt(path, "tensor " + entry.name() + " lies outside the payload");
    }
    CheckpointTensor t;
    t.name = entry.name();
    t.shape.assign(entry.shape().begin(), entry.shape().end());
    t.values.resize(entry.count());
    std::memcpy(t.values.data(), payload + entry.offset(), entry.count() * sizeof(float));
    return t;
  };
  Checkpoint checkpoint;
  checkpoint.path = path;
  CheckpointMeta& meta = checkpoint.meta;
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
  for (const auto& entry : header.parameters()) checkpoint.parameters.push_back(tensor(entry));
  if (header.momentum_buffers_size() != 0 &&
      header.momentum_buffers_size() != header.parameters_size()) {
    corrupt(path, std::to_string(header.momentum_buffers_size()) + " momentum buffers for " +
                      std::to_string(header.parameters_size()) + " parameters");
  }
  for (const auto& entry : header.momentum_buffers()) {
    checkpoint.momentum.push_back(std::move(tensor(entry).values));
  }
  return checkpoint;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const int64_t step = step_of(name);
    if (step >= 0) found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a > b; });
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

std::optional<Checkpoint> load_latest_checkpoint(const std::string& dir) {
  for (const std::string& path : list_checkpoints(dir)) {
    try {
      return read_checkpoint(path);
    } catch (const Error& error) {
      RINGD_LOG(kWarn) << "skipping checkpoint " << path << ": " << error.what()
                       << "; trying the previous one";
    }
  }
  return std::nullopt;
}

void prune_checkpoints(const std::string& dir, size_t keep) {
  if (keep == 0) return;
  const std::vector<std::string> paths = list_checkpoints(dir);
  for (size_t i = keep; i < paths.size(); ++i) {
    if (::unlink(paths[i].c_str()) != 0) {
      RINGD_LOG(kWarn) << "cannot delete old checkpoint " << paths[i] << ": "
                       << std::strerror(errno);
    }
  }
}

}  // namespace ringd::model
