// IDX files: plain and gzip'ed read back; every malformed file is an error that names it.
#include "model/idx.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/dataset.h"
#include "ringd/error.h"

namespace ringd::model {
namespace {

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ringd-idx-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static std::vector<uint8_t> bytes_of(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
  }
  static void put(const std::string& file, const std::vector<uint8_t>& bytes) {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  static void gzip(const std::string& from, const std::string& to) {
    const std::vector<uint8_t> bytes = bytes_of(from);
    gzFile out = gzopen(to.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    ASSERT_EQ(gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    gzclose(out);
  }
  // Expects read_idx to throw a message containing the file's path and `words`.
  void expect_error(const std::string& file, size_t dims, const std::string& words) {
    try {
      read_idx(file, dims);
      FAIL() << file << " was accepted";
    } catch (const Error& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(file), std::string::npos) << message;
      EXPECT_NE(message.find(words), std::string::npos) << message;
    }
  }

  std::filesystem::path dir_;
};

std::vector<uint8_t> ramp(size_t n) {
  std::vector<uint8_t> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<uint8_t>(i * 7);
  return data;
}

TEST_F(IdxTest, PlainAndGzipReadBack) {
  write_idx(path("images"), {3, 2, 4}, ramp(24));
  gzip(path("images"), path("images.gz"));
  for (const std::string& file : {path("images"), path("images.gz")}) {
    const IdxArray array = read_idx(file, 3);
    EXPECT_EQ(array.dims, (std::vector<uint32_t>{3, 2, 4}));
    EXPECT_EQ(array.data, ramp(24));
    const IdxArray first = read_idx(file, 3, 2);
    EXPECT_EQ(first.dims, (std::vector<uint32_t>{2, 2, 4}));
    const std::vector<uint8_t> all = ramp(24);
    EXPECT_EQ(first.data, std::vector<uint8_t>(all.begin(), all.begin() + 16));
  }
}

// Found by tests/fuzz/idx_fuzz.cc: a 13-byte file whose header claims 3.5 GB of labels made
// read_idx allocate (and zero) all of it before finding the file truncated. Memory now grows with
// the bytes that arrive: under a 1 GiB address-space limit the file is refused as truncated.
TEST_F(IdxTest, AHeaderClaimingGigabytesCostsNoMemory) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: no RLIMIT_AS under it";
#endif
  put(path("huge"), {0, 0, 0x08, 1, 0xe0, 0, 0, 0, 1, 2, 3, 4, 5});
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const rlimit limit{size_t{1} << 30, size_t{1} << 30};
    ::setrlimit(RLIMIT_AS, &limit);
    try {
      read_idx(path("huge"), 1);
    } catch (const Error& error) {
      const bool named = std::string(error.what()).find("needs 3758096384 bytes, the file has 5") !=
                         std::string::npos;
      ::_exit(named ? 0 : 2);
    } catch (...) {
      ::_exit(3);  // std::bad_alloc: the header's claim was allocated
    }
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "exit " << WEXITSTATUS(status) << " (2: not named as truncated, 3: bad_alloc)";
}

TEST_F(IdxTest, MalformedFilesAreNamed) {
  expect_error(path("missing"), 1, "cannot be opened");
  put(path("short"), {0, 0});
  expect_error(path("short"), 1, "truncated");
  put(path("magic"), {'P', 'K', 3, 4, 0, 0, 0, 1, 9});
  expect_error(path("magic"), 1, "not an IDX file");
  put(path("float"), {0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0, 0});
  expect_error(path("float"), 1, "unsigned bytes");
  write_idx(path("labels"), {4}, ramp(4));
  expect_error(path("labels"), 3, "has 1 dimensions, expected 3");
  std::vector<uint8_t> bytes = bytes_of(path("labels"));
  bytes.pop_back();
  put(path("truncated"), bytes);
  expect_error(path("truncated"), 1, "truncated");
  bytes.push_back(1);
  bytes.push_back(2);
  put(path("trailing"), bytes);
  expect_error(path("trailing"), 1, "bytes after the data");
  put(path("zero"), {0, 0, 8, 1, 0, 0, 0, 0});
  expect_error(path("zero"), 1, "dimension 0 is 0");
  put(path("huge"), {0, 0, 8, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 9});
  expect_error(path("huge"), 3, "corrupt header");
  // A gzip stream cut in half.
  write_idx(path("big"), {100, 10, 10}, ramp(10000));
  gzip(path("big"), path("big.gz"));
  bytes = bytes_of(path("big.gz"));
  bytes.resize(bytes.size() / 2);
  put(path("cut.gz"), bytes);
  try {
    read_idx(path("cut.gz"), 3);
    FAIL() << "a cut gzip stream was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(path("cut.gz")), std::string::npos) << error.what();
  }
}

TEST_F(IdxTest, DatasetPairsImagesWithLabels) {
  write_idx(path("train-images-idx3-ubyte"), {3, 2, 2}, ramp(12));
  write_idx(path("train-labels-idx1-ubyte"), {3}, {2, 0, 1});
  gzip(path("train-images-idx3-ubyte"), path("t10k-images-idx3-ubyte.gz"));
  write_idx(path("t10k-labels-idx1-ubyte"), {2}, {1, 1});
  const Dataset train = load_idx_dataset(dir_.string(), "train");
  EXPECT_EQ(train.rows, 3u);
  EXPECT_EQ(train.features, 4u);
  EXPECT_EQ(train.classes, 3u);
  EXPECT_EQ(train.labels, (std::vector<int32_t>{2, 0, 1}));
  try {
    load_idx_dataset(dir_.string(), "t10k");
    FAIL() << "3 images with 2 labels were accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("3 images"), std::string::npos) << error.what();
  }
  EXPECT_EQ(load_idx_dataset(dir_.string(), "t10k", 2).rows, 2u) << "--test-limit 2 fits";
  try {
    load_idx_dataset(dir_.string(), "nope");
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("nope-images-idx3-ubyte.gz"), std::string::npos)
        << error.what();
  }
}

TEST(DataOrder, EpochPermutationsAndRankSlices) {
  const std::vector<uint32_t> e0 = epoch_order(100, 5, 0);
  EXPECT_EQ(e0, epoch_order(100, 5, 0)) << "deterministic";
  EXPECT_NE(e0, epoch_order(100, 5, 1)) << "another epoch, another order";
  EXPECT_NE(e0, epoch_order(100, 6, 0)) << "another seed, another order";
  std::vector<uint32_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 100; ++i) EXPECT_EQ(sorted[i], i);

  Dataset data;
  data.rows = 100;
  data.features = 1;
  data.classes = 100;
  for (int i = 0; i < 100; ++i) {
    data.pixels.push_back(static_cast<uint8_t>(i));
    data.labels.push_back(i);
  }
  // Four ranks' slices of step 3 (global batch 8) are the 1-rank batch, in rank order.
  std::vector<float> inputs;
  std::vector<int32_t> labels;
  const Batch whole = assemble_batch(data, e0, 3, 8, 0, 1, &inputs, &labels);
  const std::vector<int32_t> expected(labels.begin(), labels.end());
  ASSERT_EQ(whole.rows, 8u);
  std::vector<int32_t> joined;
  for (int rank = 0; rank < 4; ++rank) {
    const Batch part = assemble_batch(data, e0, 3, 8, rank, 4, &inputs, &labels);
    EXPECT_EQ(part.rows, 2u);
    joined.insert(joined.end(), labels.begin(), labels.end());
    EXPECT_FLOAT_EQ(inputs[0], static_cast<float>(labels[0]) / 255.0f);
  }
  EXPECT_EQ(joined, expected);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(expected[i], static_cast<int32_t>(e0[24 + i]));
  EXPECT_THROW(assemble_batch(data, e0, 3, 8, 0, 3, &inputs, &labels), Error) << "8 % 3 != 0";
  EXPECT_THROW(assemble_batch(data, e0, 12, 8, 0, 1, &inputs, &labels), Error) << "past the end";
}

}  // namespace
}  // namespace ringd::model
