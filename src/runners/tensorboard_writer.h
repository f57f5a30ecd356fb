// TensorBoard event files (`ringd train --tensorboard DIR`, rank 0): scalars as TensorFlow writes
// them, so that the `tensorboard` package reads them as its own.
//
//   DIR/events.out.tfevents.<unix seconds>.<hostname>.<pid>.ringd
//
// The file is TFRecord framing around serialized Event messages (proto/tensorboard_event.proto):
// each record is a uint64 length, the masked CRC-32C of those 8 bytes (uint32), the data, the
// masked CRC-32C of the data (uint32), all little-endian; mask(crc) = ((crc >> 15) | (crc << 17))
// + 0xa282ead8. The first record is an Event with file_version "brain.Event:2".
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace ringd::runners {

class TensorBoardWriter {
 public:
  // Creates `dir` (and its parents) if missing and a new event file in it, and writes and flushes
  // its first record. Throws ringd::Error(kIo) naming the path and the system's reason.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Appends one scalar event (stored as float32, TensorBoard's simple_value). Buffered until
  // flush(); throws kIo when the write fails.
  void scalar(const std::string& tag, int64_t step, double value);
  // Hands what was written to the operating system, so that a crash of the process keeps it.
  // Throws kIo (a full disk, EIO) naming the file.
  void flush();

  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);
  [[noreturn]] void fail(int error) const;

  std::string path_;
  std::FILE* file_ = nullptr;
};

namespace detail {
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `size` bytes, and its TFRecord mask.
uint32_t crc32c(const void* data, size_t size);
uint32_t masked_crc32c(const void* data, size_t size);
}  // namespace detail

}  // namespace ringd::runners
