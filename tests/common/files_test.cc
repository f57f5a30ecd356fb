// State files ringd reads (common/files.h's read_state_file): only regular files, without
// blocking, within a bound; anything else is an error naming the path and what is there.
#include "common/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "ringd/error.h"

namespace ringd {
namespace {

namespace fs = std::filesystem;

class StateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ringd-files-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  // The error read_state_file throws for `file` (fails the test if it throws none).
  Error error_for(const std::string& file, size_t limit = 1024) const {
    std::string text;
    try {
      read_state_file(file, limit, "the marker", &text);
    } catch (const Error& error) {
      return error;
    }
    ADD_FAILURE() << "no error for " << file;
    return Error(ErrorCode::kInternal, "");
  }

  fs::path dir_;
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_F(StateFileTest, ARegularFileAndASymlinkToOneAreRead) {
  std::ofstream(path("marker")) << "{\"exit_code\":0}\n";
  fs::create_symlink(path("marker"), path("link"));
  for (const char* name : {"marker", "link"}) {
    std::string text;
    ASSERT_TRUE(read_state_file(path(name), 1024, "the marker", &text));
    EXPECT_EQ(text, "{\"exit_code\":0}\n");
  }
}

TEST_F(StateFileTest, NothingThereIsFalse) {
  std::string text = "old";
  EXPECT_FALSE(read_state_file(path("absent"), 1024, "the marker", &text));
}

TEST_F(StateFileTest, ADirectoryIsAnErrorNamingIt) {
  fs::create_directories(path("marker"));
  const Error error = error_for(path("marker"));
  EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(error.what(), "the marker " + path("marker") +
                                         " is a directory, not a "
                                         "regular file"))
      << error.what();
}

// A FIFO with no writer would hang a blocking open; this returns at once.
TEST_F(StateFileTest, AFifoIsAnErrorAtOnce) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  const Error error = error_for(path("fifo"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(contains(error.what(), "is a FIFO, not a regular file")) << error.what();
}

TEST_F(StateFileTest, ADeviceIsAnErrorNotAnEndlessRead) {
  const Error error = error_for("/dev/zero");
  EXPECT_TRUE(contains(error.what(), "/dev/zero is a character device")) << error.what();
}

TEST_F(StateFileTest, AFileOverTheBoundIsAnError) {
  std::ofstream(path("big")) << std::string(2000, 'x');
  const Error error = error_for(path("big"), 1024);
  EXPECT_TRUE(contains(error.what(), "holds 2000 bytes, more than the 1024")) << error.what();
}

}  // namespace
}  // namespace ringd
