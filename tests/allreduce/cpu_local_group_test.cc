// CpuLocalGroup (src/device/): reduce-to-leader, broadcast, reduce-scatter and allgather across L
// host "devices", for L 1..8, every dtype x op, counts around the block and slice sizes, and
// 1..4 worker threads; expected values in closed form (device d is rank d of testing/values.h).
// Also the WorkerPool under it.
#include "device/cpu_local_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <tuple>

#include "device/worker_pool.h"
#include "ringd/error.h"
#include "testing/check.h"
#include "testing/local_devices.h"

namespace ringd {
namespace {

using testing::NodeDevices;

// 0, 1, small primes, one 16 KB block +- 1 (float), and sizes that need several worker slices.
const std::vector<size_t> kCounts = {0, 1, 2, 13, 4095, 4097, 70001, 262147};

void fill_inputs(NodeDevices& node, ReduceOp op, size_t count, DataType dtype) {
  for (int d = 0; d < node.group->size(); ++d) {
    const auto input = testing::make_input(op, d, count, dtype);
    std::memcpy(node.memory[d].data(), input.data(), count * dtype_size(dtype));
  }
}

std::string check_range(const NodeDevices& node, int device, size_t first, size_t count,
                        DataType dtype, ReduceOp op) {
  const double tolerance = op == ReduceOp::kAvg ? testing::avg_tolerance(dtype) : 0.0;
  const int devices = node.group->size();
  return testing::first_mismatch(
      node.memory[device].data() + first * dtype_size(dtype), count, dtype, tolerance,
      [&](size_t i) { return testing::expected_value(op, devices, first + i); });
}

using ShapeParam = std::tuple<int, int>;  // devices, threads
class CpuLocalGroupShapes : public ::testing::TestWithParam<ShapeParam> {};

TEST_P(CpuLocalGroupShapes, ReduceToEveryLeaderThenBroadcast) {
  const auto [devices, threads] = GetParam();
  const DataType dtype = DataType::kFloat32;
  for (size_t count : kCounts) {
    NodeDevices node(devices, count * 4, threads);
    for (int leader = 0; leader < devices; ++leader) {
      fill_inputs(node, ReduceOp::kSum, count, dtype);
      node.group->reduce_to_leader(node.buffers, 0, count, dtype, ReduceOp::kSum, leader);
      ASSERT_EQ(check_range(node, leader, 0, count, dtype, ReduceOp::kSum), "")
          << "leader " << leader << " count " << count;
      for (int d = 0; d < devices; ++d) {  // the others keep their input
        if (d == leader) continue;
        ASSERT_EQ(
            std::memcmp(node.memory[d].data(),
                        testing::make_input(ReduceOp::kSum, d, count, dtype).data(), count * 4),
            0)
            << "device " << d << " was modified by a reduce to " << leader;
      }
      node.group->broadcast_from_leader(node.buffers, 0, count, dtype, leader);
      for (int d = 0; d < devices; ++d) {
        ASSERT_EQ(std::memcmp(node.memory[d].data(), node.memory[leader].data(), count * 4), 0)
            << "device " << d << " count " << count;
        ASSERT_EQ(node.memory[d][count * 4], 0x5A) << "wrote past the end";
      }
    }
  }
}

// Values that f16 cannot add exactly: a different combining order would show in the bits.
void fill_inexact(NodeDevices& node, size_t count) {
  for (int d = 0; d < node.group->size(); ++d) {
    for (size_t i = 0; i < count; ++i) {
      testing::store_value(node.memory[d].data(), i, DataType::kFloat16,
                           1.0 + 0.1 * d + 0.37 * static_cast<double>((i * 7) % 13));
    }
  }
}

TEST_P(CpuLocalGroupShapes, ReduceScatterThenAllgatherHasTheBitsOfReduceToAnyLeader) {
  const auto [devices, threads] = GetParam();
  const DataType dtype = DataType::kFloat16;  // rounds per step: the order must be fixed
  for (size_t count : kCounts) {
    NodeDevices reference(devices, count * 2, threads);
    fill_inexact(reference, count);
    reference.group->reduce_to_leader(reference.buffers, 0, count, dtype, ReduceOp::kSum,
                                      devices - 1);

    NodeDevices node(devices, count * 2, threads);
    fill_inexact(node, count);
    const ShardLayout shards = ShardLayout::even(0, count, devices);
    node.group->reduce_scatter(node.buffers, shards, dtype, ReduceOp::kSum);
    node.group->allgather(node.buffers, shards, dtype);
    for (int d = 0; d < devices; ++d) {
      ASSERT_EQ(std::memcmp(node.memory[d].data(), reference.memory[devices - 1].data(), count * 2),
                0)
          << "device " << d << " count " << count << ": not the bits of reduce_to_leader";
      ASSERT_EQ(node.memory[d][count * 2], 0x5A) << "wrote past the end";
    }
  }
}

TEST_P(CpuLocalGroupShapes, RangesLeaveTheRestAlone) {
  const auto [devices, threads] = GetParam();
  const size_t count = 50000, first = 777, length = 40001;
  NodeDevices node(devices, count * 8, threads);
  fill_inputs(node, ReduceOp::kMax, count, DataType::kFloat64);
  node.group->reduce_to_leader(node.buffers, first, length, DataType::kFloat64, ReduceOp::kMax, 0);
  node.group->broadcast_from_leader(node.buffers, first, length, DataType::kFloat64, 0);
  for (int d = 0; d < devices; ++d) {
    ASSERT_EQ(check_range(node, d, first, length, DataType::kFloat64, ReduceOp::kMax), "");
    const auto input = testing::make_input(ReduceOp::kMax, d, count, DataType::kFloat64);
    EXPECT_EQ(std::memcmp(node.memory[d].data(), input.data(), first * 8), 0) << "before range";
    const size_t end = (first + length) * 8;
    EXPECT_EQ(std::memcmp(node.memory[d].data() + end, input.data() + end, count * 8 - end), 0)
        << "after range";
  }
}

INSTANTIATE_TEST_SUITE_P(All, CpuLocalGroupShapes,
                         ::testing::Combine(::testing::Range(1, 9), ::testing::Values(1, 2, 4)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "devices_" +
                                  std::to_string(std::get<1>(info.param)) + "threads";
                         });

using TypeParam = std::tuple<DataType, ReduceOp>;
class CpuLocalGroupTypes : public ::testing::TestWithParam<TypeParam> {};

TEST_P(CpuLocalGroupTypes, EveryDtypeAndOp) {
  const auto [dtype, op] = GetParam();
  if (!reduce_op_supported(dtype, op)) GTEST_SKIP() << "avg is defined for float types only";
  for (int devices : {1, 2, 3, 8}) {
    for (size_t count : {size_t{1}, size_t{13}, size_t{4097}, size_t{70001}}) {
      NodeDevices node(devices, count * dtype_size(dtype), 2);
      fill_inputs(node, op, count, dtype);
      const ShardLayout shards = ShardLayout::even(0, count, devices);
      node.group->reduce_scatter(node.buffers, shards, dtype, op);
      node.group->allgather(node.buffers, shards, dtype);
      for (int d = 0; d < devices; ++d) {
        ASSERT_EQ(check_range(node, d, 0, count, dtype, op), "")
            << devices << " devices, device " << d << " count " << count;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, CpuLocalGroupTypes,
                         ::testing::Combine(::testing::ValuesIn(kAllDataTypes),
                                            ::testing::ValuesIn(kAllReduceOps)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_" +
                                  reduce_op_name(std::get<1>(info.param));
                         });

TEST(ShardLayout, EvenSplitsDifferByAtMostOne) {
  const ShardLayout layout = ShardLayout::even(10, 7, 3);
  EXPECT_EQ(layout.offsets, (std::vector<size_t>{10, 13, 15, 17}));
  const ShardLayout empty = ShardLayout::even(0, 2, 4);
  EXPECT_EQ(empty.offsets, (std::vector<size_t>{0, 1, 2, 2, 2}));
  EXPECT_EQ(empty.count(3), 0u);
}

TEST(CpuLocalGroup, RejectsBuffersThatDoNotMatchTheDevices) {
  NodeDevices node(3, 64);
  auto code_of = [](auto call) {
    try {
      call();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;
  };
  std::vector<DeviceBuffer> two(node.buffers.begin(), node.buffers.begin() + 2);
  EXPECT_EQ(code_of([&] {
              node.group->reduce_to_leader(two, 0, 4, DataType::kFloat32, ReduceOp::kSum, 0);
            }),
            ErrorCode::kInvalidArgument);
  std::vector<DeviceBuffer> swapped = node.buffers;
  std::swap(swapped[0], swapped[1]);
  EXPECT_EQ(
      code_of([&] { node.group->broadcast_from_leader(swapped, 0, 4, DataType::kFloat32, 0); }),
      ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] {
              node.group->reduce_to_leader(node.buffers, 0, 4, DataType::kFloat32, ReduceOp::kSum,
                                           3);
            }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] {
              node.group->reduce_scatter(node.buffers, ShardLayout::even(0, 4, 3), DataType::kInt32,
                                         ReduceOp::kAvg);
            }),
            ErrorCode::kInvalidArgument);
}

TEST(CpuLocalGroup, LargeBuffersUseSeveralThreads) {
  device::CpuLocalGroup group(4, CpuLocalGroupOptions{3});
  EXPECT_EQ(group.threads(), 3);
  EXPECT_EQ(make_cpu_local_group(5)->size(), 5);
}

TEST(WorkerPool, RunsEveryTaskOnceOnDistinctThreadsAndRethrows) {
  device::WorkerPool pool(4);
  for (int round = 0; round < 200; ++round) {
    const int tasks = 1 + round % 4;
    std::vector<std::atomic<int>> runs(4);
    std::mutex mutex;
    std::set<std::thread::id> threads;
    pool.run(tasks, [&](int task) {
      runs[task]++;
      std::lock_guard<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
    });
    for (int t = 0; t < 4; ++t) ASSERT_EQ(runs[t].load(), t < tasks ? 1 : 0) << "round " << round;
    ASSERT_EQ(static_cast<int>(threads.size()), tasks);
    ASSERT_EQ(threads.count(std::this_thread::get_id()), 1u) << "task 0 runs on the caller";
  }
  for (int failing : {0, 2}) {
    try {
      pool.run(3, [&](int task) {
        if (task == failing) RINGD_THROW(kInternal, "task " << task << " failed");
      });
      ADD_FAILURE() << "no exception from task " << failing;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("task " + std::to_string(failing)), std::string::npos);
    }
  }
  std::atomic<int> after{0};
  pool.run(4, [&](int) { after++; });
  EXPECT_EQ(after.load(), 4) << "the pool must stay usable after a failed task";
}

}  // namespace
}  // namespace ringd
