#include "runners/tensorboard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>

#include "common/host_name.h"
#include "proto/tensorboard_event.pb.h"
#include "ringd/error.h"

namespace ringd::runners {
namespace {

// CRC-32C by a 256-entry table, one byte at a time: Debian 12 packages no C++ CRC-32C library
// (crc32c, abseil's, Snappy's are not there), and a few records per progress line need no speed.
constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0);
    table[i] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

void append_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

namespace detail {

uint32_t crc32c(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = kCrc32cTable[(crc ^ bytes[i]) & 0xff] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace detail

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    RINGD_THROW(kIo, "cannot create the TensorBoard directory " << dir << ": " << ec.message());
  }
  const std::string base = dir + "/events.out.tfevents." + std::to_string(std::time(nullptr)) +
                           "." + host_name() + "." + std::to_string(::getpid());
  // O_EXCL: a second writer of this process in the same second gets a name of its own instead of
  // truncating the first one's file.
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    path_ = base + (attempt == 0 ? "" : "." + std::to_string(attempt)) + ".ringd";
    fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && (errno != EEXIST || attempt >= 100)) fail(errno);
  }
  file_ = ::fdopen(fd, "wb");
  if (file_ == nullptr) {
    const int error = errno;
    ::close(fd);
    fail(error);
  }
  try {
    tensorboard::Event event;
    event.set_wall_time(wall_time());
    event.set_file_version("brain.Event:2");
    write_record(event.SerializeAsString());
    flush();
  } catch (...) {
    std::fclose(file_);  // no destructor runs for an object whose constructor threw
    throw;
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardWriter::scalar(const std::string& tag, int64_t step, double value) {
  tensorboard::Event event;
  event.set_wall_time(wall_time());
  event.set_step(step);
  tensorboard::Summary::Value* entry = event.mutable_summary()->add_value();
  entry->set_tag(tag);
  entry->set_simple_value(static_cast<float>(value));
  write_record(event.SerializeAsString());
}

void TensorBoardWriter::flush() {
  if (std::fflush(file_) != 0) fail(errno);
}

void TensorBoardWriter::write_record(const std::string& data) {
  std::string record;
  record.reserve(data.size() + 16);
  append_le(record, data.size(), 8);
  append_le(record, detail::masked_crc32c(record.data(), 8), 4);
  record += data;
  append_le(record, detail::masked_crc32c(data.data(), data.size()), 4);
  errno = 0;
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    fail(errno != 0 ? errno : EIO);
  }
}

void TensorBoardWriter::fail(int error) const {
  RINGD_THROW(kIo, "cannot write TensorBoard events " << path_ << ": " << std::strerror(error));
}

}  // namespace ringd::runners
