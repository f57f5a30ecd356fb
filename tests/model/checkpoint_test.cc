// Checkpoint files: round trip, corruption and truncation detected (and skipped in favour of the
// previous one), a full disk (injected ENOSPC) leaving the previous checkpoint intact and no
// temporary file behind, pruning (a run's own files only), files that are not regular (directory,
// FIFO, symbolic link) skipped without blocking or following, stale temporaries removed.
#include "model/checkpoint.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "ringd/error.h"

namespace ringd::model {
namespace {

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("ringd-ckpt-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
    weight_ = {1.5f, -2.0f, 3.25f, 0.0f, 5.0f, 6.0f};
    bias_ = {0.5f, -0.5f};
    params_ = {ParameterView{"layer0.weight", {2, 3}, weight_.data(), nullptr, 6},
               ParameterView{"layer0.bias", {2}, bias_.data(), nullptr, 2}};
    momentum_weight_ = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
    momentum_bias_ = {-1.0f, 1.0f};
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  CheckpointMeta meta(int64_t step) const {
    CheckpointMeta m;
    m.model = "3,2";
    m.step = step;
    m.epoch = step / 10;
    m.step_in_epoch = step % 10;
    m.seed = 42;
    m.global_batch = 64;
    m.world_size = 4;
    m.learning_rate = 0.1;
    m.momentum = 0.9;
    m.run_id = run_id_;
    return m;
  }
  std::string write(int64_t step, const CheckpointFileOps* ops = nullptr) {
    return write_checkpoint(dir_, meta(step), params_,
                            {momentum_weight_.data(), momentum_bias_.data()}, ops);
  }
  static std::vector<char> bytes_of(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(in)), {});
  }
  static void put(const std::string& file, const std::vector<char>& bytes) {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  void expect_corrupt(const std::string& file, const std::string& words) {
    try {
      read_checkpoint(file);
      FAIL() << file << " was accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kProtocol);
      EXPECT_NE(std::string(error.what()).find(file), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    }
  }
  size_t files_in_dir() const {
    size_t n = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir_)) ++n;
    return n;
  }

  std::string dir_;
  std::string run_id_ = "run-a";
  std::vector<float> weight_, bias_, momentum_weight_, momentum_bias_;
  std::vector<ParameterView> params_;
};

TEST_F(CheckpointTest, RoundTrip) {
  const std::string path = write(20);
  EXPECT_EQ(path, dir_ + "/ckpt-0000000020.ringd");
  EXPECT_EQ(files_in_dir(), 1u) << "no temporary file left behind";
  const Checkpoint checkpoint = read_checkpoint(path);
  EXPECT_EQ(checkpoint.meta.model, "3,2");
  EXPECT_EQ(checkpoint.meta.step, 20);
  EXPECT_EQ(checkpoint.meta.epoch, 2);
  EXPECT_EQ(checkpoint.meta.step_in_epoch, 0);
  EXPECT_EQ(checkpoint.meta.seed, 42u);
  EXPECT_EQ(checkpoint.meta.global_batch, 64);
  EXPECT_EQ(checkpoint.meta.run_id, "run-a");
  EXPECT_GT(checkpoint.meta.written_unix_ns, 0);
  EXPECT_EQ(read_checkpoint_meta(path).run_id, "run-a");
  ASSERT_EQ(checkpoint.parameters.size(), 2u);
  EXPECT_EQ(checkpoint.parameters[0].name, "layer0.weight");
  EXPECT_EQ(checkpoint.parameters[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(checkpoint.parameters[0].values, weight_);
  EXPECT_EQ(checkpoint.parameters[1].values, bias_);
  ASSERT_EQ(checkpoint.momentum.size(), 2u);
  EXPECT_EQ(checkpoint.momentum[0], momentum_weight_);
  EXPECT_EQ(checkpoint.momentum[1], momentum_bias_);
  // Without momentum.
  const std::string bare = write_checkpoint(dir_, meta(30), params_, {});
  EXPECT_TRUE(read_checkpoint(bare).momentum.empty());
}

// Found by tests/fuzz/checkpoint_fuzz.cc: a file whose checksum is right but whose entry holds
// fewer values than its shape (written by a confused or hostile writer) was read as intact.
TEST_F(CheckpointTest, AShapeThatDisagreesWithItsValuesIsCorrupt) {
  std::vector<ParameterView> wrong = params_;
  wrong[0].count = 5;  // shape [2, 3]
  const std::string path = write_checkpoint(dir_, meta(10), wrong, {});
  expect_corrupt(path, "layer0.weight's shape holds 6 values, its entry 5");
  wrong = params_;
  wrong[1].shape = {-2, -1};
  const std::string negative = write_checkpoint(dir_, meta(11), wrong, {});
  expect_corrupt(negative, "impossible shape");
}

// Found by tests/fuzz/checkpoint_fuzz.cc (UBSan): an empty tensor was copied from a null buffer.
TEST_F(CheckpointTest, AnEmptyTensorRoundTrips) {
  std::vector<ParameterView> with_empty = params_;
  with_empty.push_back(ParameterView{"layer1.empty", {0, 4}, nullptr, nullptr, 0});
  const Checkpoint read = read_checkpoint(write_checkpoint(dir_, meta(12), with_empty, {}));
  ASSERT_EQ(read.parameters.size(), 3u);
  EXPECT_EQ(read.parameters[2].shape, (std::vector<int64_t>{0, 4}));
  EXPECT_TRUE(read.parameters[2].values.empty());
}

TEST_F(CheckpointTest, CorruptionAndTruncationAreDetected) {
  const std::string path = write(10);
  const std::vector<char> good = bytes_of(path);
  // Every single flipped byte is caught (the checksum covers everything before it, and a flip
  // inside the checksum itself no longer matches).
  for (size_t at = 0; at < good.size(); at += 7) {
    std::vector<char> bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x40);
    put(path, bad);
    EXPECT_THROW(read_checkpoint(path), Error) << "flip at byte " << at;
  }
  std::vector<char> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() - 9));
  put(path, cut);
  expect_corrupt(path, "truncated");
  std::vector<char> longer = good;
  longer.push_back('!');
  put(path, longer);
  expect_corrupt(path, "not the file the header describes");
  put(path, std::vector<char>(good.begin(), good.begin() + 20));
  expect_corrupt(path, "truncated");
  put(path, std::vector<char>{'n', 'o', 't', ' ', 'a', ' ', 'c', 'k', 'p', 't', '!', '!',
                              '!', '!', '!', '!', '!', '!', '!', '!', '!', '!', '!', '!',
                              '!', '!', '!', '!', '!', '!', '!', '!', '!', '!', '!', '!',
                              '!', '!', '!', '!', '!', '!', '!', '!', '!', '!'});
  expect_corrupt(path, "not a ringd checkpoint");
}

TEST_F(CheckpointTest, LatestIntactOneIsLoadedAndCorruptOnesSkipped) {
  EXPECT_FALSE(load_latest_checkpoint(dir_).has_value()) << "no directory at all";
  write(10);
  weight_[0] = 99;
  write(20);
  weight_[0] = 77;
  const std::string newest = write(30);
  EXPECT_EQ(load_latest_checkpoint(dir_)->meta.step, 30);
  std::vector<char> bytes = bytes_of(newest);
  bytes[bytes.size() / 2] ^= 1;
  put(newest, bytes);  // corrupt the newest: the previous one is used
  std::optional<Checkpoint> latest = load_latest_checkpoint(dir_);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->meta.step, 20);
  EXPECT_EQ(latest->parameters[0].values[0], 99.0f);
  bytes = bytes_of(dir_ + "/ckpt-0000000020.ringd");
  bytes.resize(bytes.size() - 100);
  put(dir_ + "/ckpt-0000000020.ringd", bytes);  // and truncate that one too
  EXPECT_EQ(load_latest_checkpoint(dir_)->meta.step, 10);
  put(dir_ + "/ckpt-0000000010.ringd", {});
  EXPECT_FALSE(load_latest_checkpoint(dir_).has_value()) << "none intact";
  // Other files in the directory are not checkpoints.
  put(dir_ + "/ckpt-x.ringd", {'x'});
  put(dir_ + "/notes.txt", {'x'});
  EXPECT_EQ(list_checkpoints(dir_).size(), 3u);
}

// load_latest_checkpoint with `file` named like a newer checkpoint than the intact step 20: the
// warning names it, and step 20 is loaded.
void expect_skipped_for_step_20(const std::string& dir, const std::string& file,
                                const std::string& why) {
  ::testing::internal::CaptureStderr();
  std::optional<Checkpoint> latest;
  try {
    latest = load_latest_checkpoint(dir);
  } catch (const std::exception& error) {
    ADD_FAILURE() << "load_latest_checkpoint threw: " << error.what();
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->meta.step, 20);
  EXPECT_NE(log.find("skipping checkpoint " + file), std::string::npos) << log;
  EXPECT_NE(log.find(why), std::string::npos) << log;
}

// Fails on the old code: std::ifstream read the directory and threw the standard library's
// "basic_filebuf::underflow error reading the file: Is a directory", naming no file.
TEST_F(CheckpointTest, ADirectoryNamedLikeACheckpointIsSkipped) {
  write(20);
  const std::string fake = checkpoint_path(dir_, 30);
  std::filesystem::create_directory(fake);
  expect_skipped_for_step_20(dir_, fake, "a directory, not a regular file");
  expect_corrupt(fake, "not a regular file");
}

// Fails on the old code by blocking in open() until a writer appears (the test then opens the
// FIFO for writing itself, so that it ends).
TEST_F(CheckpointTest, AFifoIsSkippedWithoutBlocking) {
  write(20);
  const std::string fifo = checkpoint_path(dir_, 30);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0) << std::strerror(errno);
  auto loaded =
      std::async(std::launch::async, [&] { expect_skipped_for_step_20(dir_, fifo, "FIFO"); });
  if (loaded.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "load_latest_checkpoint blocked on the FIFO " << fifo;
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (writer >= 0) ::close(writer);
  }
  loaded.get();
}

// Fails on the old code: it followed the link and loaded step 30. (A link to /dev/zero read
// until memory ran out.)
TEST_F(CheckpointTest, ASymbolicLinkIsNotFollowed) {
  write(20);
  const std::string elsewhere = dir_ + "/elsewhere";
  std::filesystem::create_directory(elsewhere);
  const std::string target = write_checkpoint(elsewhere, meta(30), params_, {});
  const std::string link = checkpoint_path(dir_, 30);
  std::filesystem::create_symlink(target, link);
  expect_skipped_for_step_20(dir_, link, "symbolic link");
}

TEST_F(CheckpointTest, FullDiskLeavesThePreviousCheckpointIntact) {
  const std::string previous = write(10);
  const std::vector<char> before = bytes_of(previous);
  for (size_t budget : {size_t{0}, size_t{5}, size_t{40}, size_t{100}}) {
    size_t written = 0;
    CheckpointFileOps ops{[&](int fd, const void* data, size_t bytes) -> ssize_t {
      if (written >= budget) {
        errno = ENOSPC;
        return -1;
      }
      const size_t n = std::min(bytes, budget - written);
      written += n;
      return ::write(fd, data, n);
    }};
    try {
      write(20, &ops);
      FAIL() << "a full disk went unnoticed";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kIo);
      const std::string message = error.what();
      EXPECT_NE(message.find("no space left"), std::string::npos) << message;
      EXPECT_NE(message.find("ckpt-0000000020.ringd"), std::string::npos) << message;
    }
    EXPECT_EQ(files_in_dir(), 1u) << "the temporary file is removed (budget " << budget << ")";
    EXPECT_EQ(bytes_of(previous), before);
    EXPECT_EQ(load_latest_checkpoint(dir_)->meta.step, 10);
  }
}

TEST_F(CheckpointTest, PruneKeepsTheNewestOfTheRun) {
  for (int64_t step : {5, 10, 15, 20}) write(step);
  CheckpointPruner(dir_, run_id_, 2).prune(20);
  EXPECT_EQ(list_checkpoints(dir_),
            (std::vector<std::string>{checkpoint_path(dir_, 20), checkpoint_path(dir_, 15)}));
  CheckpointPruner(dir_, run_id_, 0).prune(20);
  EXPECT_EQ(list_checkpoints(dir_).size(), 2u);
}

// Other runs' files, corrupt files and the run's own files beyond the step just written are
// neither deleted nor counted, each named once in a warning; the file just written always stays.
TEST_F(CheckpointTest, PruningLeavesOtherRunsAndCorruptFilesAloneAndCountsOnlyItsOwn) {
  run_id_ = "older-run";
  for (int64_t step : {40, 50}) write(step);
  run_id_ = "this-run";
  write(60);  // left by this run before it resumed at 10, say; corrupt:
  std::vector<char> bytes = bytes_of(checkpoint_path(dir_, 60));
  bytes[bytes.size() - 40] ^= 1;  // in the payload: the header still reads
  put(checkpoint_path(dir_, 60), bytes);
  put(checkpoint_path(dir_, 70), {'n', 'o', 'p', 'e'});
  for (int64_t step : {10, 20, 30}) write(step);
  CheckpointPruner pruner(dir_, run_id_, 2);
  ::testing::internal::CaptureStderr();
  pruner.prune(30);
  pruner.prune(30);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(list_checkpoints(dir_),
            (std::vector<std::string>{checkpoint_path(dir_, 70), checkpoint_path(dir_, 60),
                                      checkpoint_path(dir_, 50), checkpoint_path(dir_, 40),
                                      checkpoint_path(dir_, 30), checkpoint_path(dir_, 20)}));
  for (int64_t step : {40, 50, 60, 70}) {
    const std::string warning = "neither counts nor deletes " + checkpoint_path(dir_, step);
    const size_t at = log.find(warning);
    EXPECT_NE(at, std::string::npos) << log;
    EXPECT_EQ(log.find(warning, at + 1), std::string::npos) << "warned once: " << log;
  }
  EXPECT_NE(log.find("another run (run id older-run"), std::string::npos) << log;
  EXPECT_NE(log.find("beyond step 30"), std::string::npos) << log;
  // With keep 1 the file just written stays, however new the others' steps are.
  CheckpointPruner(dir_, run_id_, 1).prune(30);
  EXPECT_TRUE(std::filesystem::exists(checkpoint_path(dir_, 30)));
  EXPECT_FALSE(std::filesystem::exists(checkpoint_path(dir_, 20)));
}

// Fails on the old code, which took the highest step (the other run's 50).
TEST_F(CheckpointTest, TheRunThatWroteLastIsResumed) {
  run_id_ = "older-run";
  write(50);
  run_id_ = "newer-run";
  weight_[0] = 11;
  write(10);
  std::optional<Checkpoint> latest = load_latest_checkpoint(dir_);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->meta.step, 10);
  EXPECT_EQ(latest->meta.run_id, "newer-run");
  // Its file corrupt: the file written before it.
  std::vector<char> bytes = bytes_of(checkpoint_path(dir_, 10));
  bytes[bytes.size() - 40] ^= 1;
  put(checkpoint_path(dir_, 10), bytes);
  EXPECT_EQ(load_latest_checkpoint(dir_)->meta.step, 50);
}

// A link to /dev/zero (read until memory ran out before) and a regular file far larger than its
// header says (read whole before) are refused without reading them.
TEST_F(CheckpointTest, NothingBeyondTheSizeTheHeaderDescribesIsRead) {
  const std::string zero = dir_ + "/zero";
  std::filesystem::create_directories(dir_);
  std::filesystem::create_symlink("/dev/zero", zero);
  expect_corrupt(zero, "symbolic link");
  const std::string path = write(10);
  std::filesystem::resize_file(path, uint64_t{64} << 30);  // sparse: 64 GiB
  const auto start = std::chrono::steady_clock::now();
  expect_corrupt(path, "not the file the header describes");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// A temporary file is locked while it is written: the cleanup leaves it alone (and the write
// completes); unlocked ones (a killed writer's) are removed, other files are not touched.
TEST_F(CheckpointTest, StaleTemporariesGoAndTheOneBeingWrittenStays) {
  std::filesystem::create_directories(dir_);
  put(dir_ + "/.tmp-123-ckpt-0000000010.ringd", std::vector<char>(1000, 'x'));
  put(dir_ + "/.tmp-x-ckpt-0000000010.ringd", {'x'});  // not a name ringd writes
  size_t removed_during_write = 99;
  bool cleaned = false;
  CheckpointFileOps ops{[&](int fd, const void* data, size_t bytes) -> ssize_t {
    if (!cleaned) {
      cleaned = true;
      removed_during_write = remove_stale_temporaries(dir_);
    }
    return ::write(fd, data, bytes);
  }};
  ::testing::internal::CaptureStderr();
  const std::string path = write(20, &ops);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(removed_during_write, 1u);
  EXPECT_NE(log.find("removed " + dir_ + "/.tmp-123-ckpt-0000000010.ringd (1000 bytes)"),
            std::string::npos)
      << log;
  EXPECT_EQ(read_checkpoint(path).meta.step, 20) << "the file being written was kept";
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/.tmp-x-ckpt-0000000010.ringd"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/.tmp-123-ckpt-0000000010.ringd"));
  EXPECT_EQ(remove_stale_temporaries(dir_), 0u);
  EXPECT_EQ(remove_stale_temporaries(dir_ + "/missing"), 0u);
}

}  // namespace
}  // namespace ringd::model
