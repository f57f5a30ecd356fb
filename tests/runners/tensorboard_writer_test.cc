// The TensorBoard event files of `ringd train --tensorboard`: CRC-32C, the TFRecord framing and the
// Event messages read back, and the I/O errors.
#include "runners/tensorboard_writer.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "proto/tensorboard_event.pb.h"
#include "ringd/error.h"

namespace ringd::runners {
namespace {

class TensorBoardWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("ringd-tensorboard-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
};

uint64_t read_le(const std::string& bytes, size_t offset, int size) {
  uint64_t value = 0;
  for (int i = 0; i < size; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  }
  return value;
}

// Every record of the file, each framing CRC checked, parsed as an Event.
std::vector<tensorboard::Event> read_events(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  std::vector<tensorboard::Event> events;
  size_t at = 0;
  while (at < bytes.size()) {
    EXPECT_LE(at + 12, bytes.size()) << "a truncated record header at byte " << at;
    if (at + 12 > bytes.size()) break;
    const uint64_t length = read_le(bytes, at, 8);
    EXPECT_EQ(read_le(bytes, at + 8, 4), detail::masked_crc32c(bytes.data() + at, 8))
        << "length CRC of the record at byte " << at;
    EXPECT_LE(at + 12 + length + 4, bytes.size()) << "a truncated record at byte " << at;
    if (at + 12 + length + 4 > bytes.size()) break;
    const std::string data = bytes.substr(at + 12, length);
    EXPECT_EQ(read_le(bytes, at + 12 + length, 4), detail::masked_crc32c(data.data(), length))
        << "data CRC of the record at byte " << at;
    tensorboard::Event event;
    EXPECT_TRUE(event.ParseFromString(data)) << "the record at byte " << at;
    events.push_back(event);
    at += 12 + length + 4;
  }
  return events;
}

TEST(Crc32c, MatchesTheCastagnoliCheckValue) {
  EXPECT_EQ(detail::crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(detail::crc32c("", 0), 0u);
  // RFC 3720 B.4: 32 bytes of zeros.
  const std::vector<unsigned char> zeros(32, 0);
  EXPECT_EQ(detail::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  const uint32_t crc = 0xE3069283u;
  EXPECT_EQ(detail::masked_crc32c("123456789", 9), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST_F(TensorBoardWriterTest, RecordsParseBackAsEvents) {
  std::string path;
  {
    TensorBoardWriter writer(dir_ + "/nested/run");  // the parents are created too
    path = writer.path();
    const std::string name = std::filesystem::path(path).filename().string();
    EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
    EXPECT_NE(name.find("." + std::to_string(::getpid()) + ".ringd"), std::string::npos) << name;
    EXPECT_EQ(std::filesystem::path(path).parent_path(),
              std::filesystem::path(dir_ + "/nested/run"));

    // The first record is on disk before any scalar.
    const std::vector<tensorboard::Event> first = read_events(path);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].file_version(), "brain.Event:2");

    writer.scalar("train/loss", 4, 2.25);
    writer.scalar("train/communication_ratio", 4, 0.0);  // a zero is still a value
    writer.flush();
    writer.scalar("test/accuracy", 8, 0.75);
    writer.flush();
  }
  const std::vector<tensorboard::Event> events = read_events(path);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_FALSE(events[0].has_summary());
  EXPECT_GT(events[0].wall_time(), 1.6e9);
  struct Expected {
    const char* tag;
    int64_t step;
    float value;
  };
  const Expected expected[] = {{"train/loss", 4, 2.25f},
                               {"train/communication_ratio", 4, 0.0f},
                               {"test/accuracy", 8, 0.75f}};
  for (size_t i = 0; i < 3; ++i) {
    const tensorboard::Event& event = events[i + 1];
    EXPECT_EQ(event.step(), expected[i].step);
    EXPECT_GE(event.wall_time(), events[0].wall_time());
    ASSERT_TRUE(event.has_summary());
    ASSERT_EQ(event.summary().value_size(), 1);
    const tensorboard::Summary::Value& value = event.summary().value(0);
    EXPECT_EQ(value.tag(), expected[i].tag);
    EXPECT_TRUE(value.has_simple_value()) << value.tag();
    EXPECT_EQ(value.simple_value(), expected[i].value);
  }
}

TEST_F(TensorBoardWriterTest, TwoWritersInOneDirectoryKeepTheirOwnFiles) {
  TensorBoardWriter first(dir_);
  TensorBoardWriter second(dir_);
  EXPECT_NE(first.path(), second.path());
  first.scalar("a", 1, 1);
  first.flush();
  EXPECT_EQ(read_events(first.path()).size(), 2u);
  EXPECT_EQ(read_events(second.path()).size(), 1u);
}

TEST_F(TensorBoardWriterTest, AnUnwritableDirectoryThrowsIoNamingIt) {
  std::filesystem::create_directories(dir_);
  const std::string file = dir_ + "/plain-file";
  std::ofstream(file) << "not a directory";
  const std::string bad = file + "/events";
  try {
    TensorBoardWriter writer(bad);
    FAIL() << "wrote events under a regular file: " << writer.path();
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(error.what()).find(bad), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("TensorBoard"), std::string::npos) << error.what();
  }
}

// A write the system refuses (a full disk, EIO) throws kIo naming the file and the reason. Made
// here with a file-size limit: past it write() fails with EFBIG (SIGXFSZ ignored).
TEST_F(TensorBoardWriterTest, AFailedWriteThrowsIoNamingTheFile) {
  TensorBoardWriter writer(dir_);
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  void (*saved_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0) << std::strerror(errno);
  std::string message;
  ErrorCode code = ErrorCode::kInternal;
  try {
    for (int step = 0; step < 10000; ++step) {
      writer.scalar("train/loss", step, 1.0 / (step + 1));
      writer.flush();
    }
  } catch (const Error& error) {
    message = error.what();
    code = error.code();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, saved_handler);
  ASSERT_FALSE(message.empty()) << "10000 scalars written past a 4 KiB file-size limit";
  EXPECT_EQ(code, ErrorCode::kIo);
  EXPECT_NE(message.find(writer.path()), std::string::npos) << message;
  EXPECT_NE(message.find(std::strerror(EFBIG)), std::string::npos) << message;
}

}  // namespace
}  // namespace ringd::runners
