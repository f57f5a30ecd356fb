// ringd launch and ringd status with something other than a marker file at the marker's path
// (issue 35, item 9): a directory made `status` print "done:" and `launch` exit 0 without
// training; a FIFO hung `status`. Now each is an error naming the path, at once.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/pod_commands.h"

namespace ringd::cli {
namespace {

namespace fs = std::filesystem;

int run(int (*command)(int, const char* const*), const std::vector<std::string>& words) {
  std::vector<const char*> argv;
  for (const std::string& word : words) argv.push_back(word.c_str());
  return command(static_cast<int>(argv.size()), argv.data());
}

class MarkerPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ringd-marker-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    marker_ = (dir_ / "launch.done").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `ringd status --marker M`: its exit code and what it printed (stdout and stderr).
  int status(std::string* output) {
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    const auto start = std::chrono::steady_clock::now();
    const int code = run(run_status_command, {"ringd", "status", "--marker", marker_});
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    *output = ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
    return code;
  }

  fs::path dir_;
  std::string marker_;
  double seconds_ = 0;
};

TEST_F(MarkerPathTest, ADirectoryAtTheMarkerIsAnErrorForStatusNotDone) {
  fs::create_directories(marker_);
  std::string output;
  const int code = status(&output);
  EXPECT_NE(code, 0) << output;
  EXPECT_EQ(output.find("done:"), std::string::npos) << output;
  EXPECT_NE(output.find(marker_ + " is a directory, not a regular file"), std::string::npos)
      << output;
}

TEST_F(MarkerPathTest, AFifoAtTheMarkerIsAnErrorForStatusAtOnce) {
  ASSERT_EQ(::mkfifo(marker_.c_str(), 0600), 0);
  std::string output;
  EXPECT_NE(status(&output), 0) << output;
  EXPECT_LT(seconds_, 2.0);
  EXPECT_NE(output.find("is a FIFO, not a regular file"), std::string::npos) << output;
}

// launch refuses (exit 4, the marker's path unusable) instead of "the job already finished ...
// not training again" with exit 0; the command never runs.
TEST_F(MarkerPathTest, ADirectoryAtTheMarkerMakesLaunchRefuseNotSkipTraining) {
  fs::create_directories(marker_);
  const std::string ran = (dir_ / "ran").string();
  setenv("RINGD_JOB_SECRET", "state-files-test", 1);
  setenv("POD_NAME", "ringd-0", 1);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = run(run_launch_command, {"ringd", "launch", "--replicas", "1", "--marker",
                                            marker_, "--", "touch", ran});
  const std::string output =
      ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
  unsetenv("RINGD_JOB_SECRET");
  unsetenv("POD_NAME");
  EXPECT_EQ(code, 4) << output;
  EXPECT_EQ(output.find("already finished"), std::string::npos) << output;
  EXPECT_NE(output.find(marker_ + " is a directory, not a regular file"), std::string::npos)
      << output;
  EXPECT_FALSE(fs::exists(ran));
}

}  // namespace
}  // namespace ringd::cli
