// DoubleBufferedStaging (device/double_buffered_staging.h), the copy schedule a GPU local group
// stages through, driven the way the hierarchy drives it (acquire i, step, release i) over a fake
// copier on host memory (testing/fake_piece_copier.h): the exact order of copies and waits for
// every access mode; the overlap property (while the caller holds piece i, the fetch of i+1 and
// the write-back of i-1 are queued and not waited for); bytes end up where they belong, with
// copies that run lazily (only when waited for) or eagerly; slots reused, never larger than the
// largest piece; and calls out of order rejected.
#include "device/double_buffered_staging.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "ringd/error.h"
#include "testing/fake_piece_copier.h"

namespace ringd {
namespace {

using device::DoubleBufferedStaging;
using testing::FakePieceCopier;
using Log = std::vector<std::string>;

// `devices` host "device" buffers of `bytes` each, every byte distinct per device.
struct Devices {
  std::vector<std::vector<unsigned char>> memory;
  std::vector<DeviceBuffer> buffers;
  Devices(int devices, size_t bytes) {
    for (int d = 0; d < devices; ++d) {
      memory.emplace_back(bytes);
      for (size_t i = 0; i < bytes; ++i) memory[d][i] = static_cast<unsigned char>(d * 37 + i);
    }
    for (int d = 0; d < devices; ++d) buffers.push_back({memory[d].data(), d});
  }
};

// Runs the caller's side as the hierarchy does; `step` sees the host bytes of each piece.
void drive(FakePieceCopier& copier, DoubleBufferedStaging& staging, size_t pieces,
           const std::function<void(size_t, unsigned char*)>& step = {}) {
  for (size_t i = 0; i < pieces; ++i) {
    auto* host = static_cast<unsigned char*>(staging.acquire(i));
    copier.hold(static_cast<int>(i % 2));
    copier.log.push_back("step " + std::to_string(i));
    if (step) step(i, host);
    copier.unhold(static_cast<int>(i % 2));
    staging.release(i);
  }
  staging.finish();
}

std::vector<HostPiece> pieces_of(int count, size_t elements) {
  std::vector<HostPiece> pieces;
  for (int i = 0; i < count; ++i) pieces.push_back({0, i * elements, elements});
  return pieces;
}

const Log kFinish = {"wait fetch s0", "wait write s0", "wait fetch s1", "wait write s1"};

Log concat(Log a, const Log& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(DoubleBufferedStaging, ReadWriteScheduleFetchesAheadAndWritesBackBehind) {
  Devices devices(1, 400);
  FakePieceCopier copier;
  const auto pieces = pieces_of(4, 25);  // 4 pieces of 25 floats
  copier.name_pieces(pieces);
  DoubleBufferedStaging staging(copier, devices.buffers, pieces, DataType::kFloat32,
                                HostAccess::kReadWrite);
  drive(copier, staging, 4);
  const Log expected =
      concat({"fetch 0 s0", "fetch 1 s1",                             // stage()
              "wait fetch s0", "step 0", "write 0 s0", "fetch 2 s0",  // 2 queued behind 0
              "wait fetch s1", "step 1", "write 1 s1", "fetch 3 s1",  //
              "wait fetch s0", "step 2", "write 2 s0",                // nothing left to fetch
              "wait fetch s1", "step 3", "write 3 s1"},
             kFinish);
  EXPECT_EQ(copier.log, expected);
  EXPECT_EQ(copier.violations, Log{});
  EXPECT_EQ(copier.largest_copy, 100u);
}

TEST(DoubleBufferedStaging, ReadOnlyNeverWritesBack) {
  Devices devices(1, 300);
  FakePieceCopier copier;
  const auto pieces = pieces_of(3, 100);
  copier.name_pieces(pieces);
  DoubleBufferedStaging staging(copier, devices.buffers, pieces, DataType::kUInt8,
                                HostAccess::kRead);
  drive(copier, staging, 3, [](size_t, unsigned char* host) { host[0] ^= 0xFF; });
  EXPECT_EQ(copier.log, concat({"fetch 0 s0", "fetch 1 s1", "wait fetch s0", "step 0", "fetch 2 s0",
                                "wait fetch s1", "step 1", "wait fetch s0", "step 2"},
                               kFinish));
  EXPECT_EQ(devices.memory[0], Devices(1, 300).memory[0]) << "a read-only piece was written back";
}

TEST(DoubleBufferedStaging, WriteOnlyNeverFetchesAndWaitsForTheSlotsLastWriteBack) {
  Devices devices(1, 300);
  FakePieceCopier copier;
  const auto pieces = pieces_of(3, 100);
  copier.name_pieces(pieces);
  DoubleBufferedStaging staging(copier, devices.buffers, pieces, DataType::kUInt8,
                                HostAccess::kWrite);
  drive(copier, staging, 3,
        [](size_t i, unsigned char* host) { std::memset(host, static_cast<int>(i + 1), 100); });
  EXPECT_EQ(copier.log, concat({"wait write s0", "step 0", "write 0 s0", "wait write s1", "step 1",
                                "write 1 s1", "wait write s0", "step 2", "write 2 s0"},
                               kFinish));
  for (size_t i = 0; i < 300; ++i) ASSERT_EQ(devices.memory[0][i], i / 100 + 1) << i;
}

// While the caller holds piece i, the fetch of i+1 and the write-back of i-1 are queued, and
// neither has been waited for since: they overlap the caller's step.
TEST(DoubleBufferedStaging, CopiesOfNeighbouringPiecesOverlapEveryStep) {
  for (int count : {1, 2, 3, 8}) {
    Devices devices(1, 64 * 8);
    FakePieceCopier copier;
    const auto pieces = pieces_of(count, 64);
    copier.name_pieces(pieces);
    DoubleBufferedStaging staging(copier, devices.buffers, pieces, DataType::kUInt8,
                                  HostAccess::kReadWrite);
    drive(copier, staging, count);
    const Log& log = copier.log;
    auto position = [&](const std::string& entry) {
      return std::find(log.begin(), log.end(), entry) - log.begin();
    };
    for (int i = 0; i < count; ++i) {
      const auto step = position("step " + std::to_string(i));
      const std::string other = " s" + std::to_string((i + 1) % 2);
      if (i + 1 < count) {
        EXPECT_LT(position("fetch " + std::to_string(i + 1) + other), step) << count << " " << i;
      }
      if (i >= 1) {
        const auto write = position("write " + std::to_string(i - 1) + other);
        EXPECT_LT(write, step) << count << " " << i;
        for (auto k = write; k < step; ++k) EXPECT_NE(log[k], "wait write" + other);
      }
    }
    EXPECT_EQ(copier.violations, Log{});
  }
}

// Pieces on several devices, in any order of devices, with uneven sizes: every byte of every
// piece goes through the caller exactly once and lands back where it came from.
TEST(DoubleBufferedStaging, BytesRoundTripThroughTheSlots) {
  std::mt19937 random(7);
  for (auto mode : {FakePieceCopier::Mode::kLazy, FakePieceCopier::Mode::kEager}) {
    for (int trial = 0; trial < 20; ++trial) {
      const int device_count = 1 + trial % 4;
      Devices devices(device_count, 1000);
      const Devices original(device_count, 1000);
      std::vector<HostPiece> pieces;
      for (int d = 0; d < device_count; ++d) {
        size_t first = random() % 50;
        while (true) {
          const size_t count = random() % 120;
          if (first + count > 1000) break;
          pieces.push_back({d, first, count});
          first += count + random() % 10;
        }
      }
      std::shuffle(pieces.begin(), pieces.end(), random);
      FakePieceCopier copier(mode);
      DoubleBufferedStaging staging(copier, devices.buffers, pieces, DataType::kUInt8,
                                    HostAccess::kReadWrite);
      drive(copier, staging, pieces.size(), [&](size_t i, unsigned char* host) {
        const HostPiece& p = pieces[i];
        ASSERT_EQ(std::memcmp(host, original.memory[p.device].data() + p.first, p.count), 0)
            << "piece " << i << " was not fetched before acquire returned";
        for (size_t k = 0; k < p.count; ++k) host[k] = static_cast<unsigned char>(host[k] + 1);
      });
      std::vector<std::vector<int>> touched(device_count, std::vector<int>(1000, 0));
      for (const HostPiece& p : pieces) {
        for (size_t k = 0; k < p.count; ++k) ++touched[p.device][p.first + k];
      }
      for (int d = 0; d < device_count; ++d) {
        for (size_t k = 0; k < 1000; ++k) {
          ASSERT_EQ(devices.memory[d][k],
                    static_cast<unsigned char>(original.memory[d][k] + touched[d][k]))
              << "device " << d << " byte " << k << " trial " << trial;
        }
      }
      EXPECT_EQ(copier.violations, Log{});
    }
  }
}

TEST(DoubleBufferedStaging, SlotsAreReusedAndGrowOnlyForALargerPiece) {
  Devices devices(2, 4000);
  FakePieceCopier copier;
  for (int round = 0; round < 3; ++round) {
    DoubleBufferedStaging staging(copier, devices.buffers, pieces_of(10, 100), DataType::kInt32,
                                  HostAccess::kReadWrite);
    drive(copier, staging, 10);
  }
  EXPECT_EQ(copier.reservations, 1);
  {
    DoubleBufferedStaging staging(copier, devices.buffers, {{1, 0, 1000}}, DataType::kInt32,
                                  HostAccess::kRead);
    drive(copier, staging, 1);
  }
  EXPECT_EQ(copier.reservations, 2);
  EXPECT_EQ(copier.largest_copy, 4000u);
  EXPECT_EQ(copier.violations, Log{});
}

TEST(DoubleBufferedStaging, NoPiecesCopiesNothing) {
  Devices devices(1, 16);
  FakePieceCopier copier;
  DoubleBufferedStaging staging(copier, devices.buffers, {}, DataType::kFloat32,
                                HostAccess::kReadWrite);
  staging.finish();
  EXPECT_EQ(copier.log, kFinish);
}

TEST(DoubleBufferedStaging, CallsOutOfOrderAreRejected) {
  Devices devices(1, 400);
  FakePieceCopier copier;
  auto expect_invalid = [](const std::function<void()>& call, const char* what) {
    try {
      call();
      ADD_FAILURE() << what << " was accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument) << what << ": " << error.what();
    }
  };
  {
    DoubleBufferedStaging staging(copier, devices.buffers, pieces_of(4, 10), DataType::kFloat32,
                                  HostAccess::kReadWrite);
    expect_invalid([&] { staging.acquire(1); }, "acquire(1) first");
    staging.acquire(0);
    expect_invalid([&] { staging.release(1); }, "release of a piece not acquired");
    staging.acquire(1);
    expect_invalid([&] { staging.acquire(2); }, "a third piece held");
    expect_invalid([&] { staging.finish(); }, "finish with pieces held");
    staging.release(0);
    staging.acquire(2);
  }  // destroyed unfinished: waits, reports nothing
  expect_invalid(
      [&] {
        DoubleBufferedStaging staging(copier, devices.buffers, {{3, 0, 1}}, DataType::kFloat32,
                                      HostAccess::kRead);
      },
      "a piece on device 3 of 1");
  EXPECT_EQ(copier.violations, Log{});
}

TEST(DoubleBufferedStaging, OneStagingAtATimePerCopier) {
  Devices devices(1, 400);
  FakePieceCopier copier;
  {
    DoubleBufferedStaging first(copier, devices.buffers, pieces_of(2, 10), DataType::kFloat32,
                                HostAccess::kReadWrite);
    EXPECT_TRUE(copier.claimed());
    try {
      DoubleBufferedStaging second(copier, devices.buffers, pieces_of(2, 10), DataType::kFloat32,
                                   HostAccess::kReadWrite);
      ADD_FAILURE() << "a second staging shared the slots of an unfinished one";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInternal) << error.what();
    }
    EXPECT_TRUE(copier.claimed()) << "the failed second staging released the first one's claim";
  }
  EXPECT_FALSE(copier.claimed());
  DoubleBufferedStaging again(copier, devices.buffers, pieces_of(2, 10), DataType::kFloat32,
                              HostAccess::kReadWrite);
  drive(copier, again, 2);
  EXPECT_EQ(copier.violations, Log{});
}

}  // namespace
}  // namespace ringd
