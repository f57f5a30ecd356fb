// Checkpoint files: round trip, corruption and truncation detected (and skipped in favour of the
// previous one), a full disk (injected ENOSPC) leaving the previous checkpoint intact and no
// temporary file behind, pruning.
#include "model/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
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
  expect_corrupt(path, "checksum");
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

TEST_F(CheckpointTest, PruneKeepsTheNewest) {
  for (int64_t step : {5, 10, 15, 20}) write(step);
  prune_checkpoints(dir_, 2);
  EXPECT_EQ(list_checkpoints(dir_), (std::vector<std::string>{dir_ + "/ckpt-0000000020.ringd",
                                                              dir_ + "/ckpt-0000000015.ringd"}));
  prune_checkpoints(dir_, 0);
  EXPECT_EQ(list_checkpoints(dir_).size(), 2u);
}

}  // namespace
}  // namespace ringd::model
