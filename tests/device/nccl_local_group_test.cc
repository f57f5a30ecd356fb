// NcclLocalGroup (ringd/nccl_local_group.h) and its pieces. Without a GPU, what needs none runs:
// the dtype/op/error mappings, argument checks, and kUnavailable from the factory; the rest skips,
// printing why. With GPUs: reduce-to-leader, broadcast, reduce-scatter and allgather (even and
// uneven shards) for L = 1..min(GPUs, 8), every dtype x op, closed-form values; host staging
// through the pinned slots (bytes round trip, slots reused); and the hierarchical collectives
// with nodes as threads, each node an NcclLocalGroup, against closed-form values, bitwise equal
// on every device.
#include <gtest/gtest.h>

#include "ringd/config.h"

#if RINGD_HAVE_NCCL

#include <deque>
#include <numeric>
#include <string>
#include <vector>

#include "device/cuda/nccl_types.h"
#include "device/cuda/reduce_kernels.h"
#include "ringd/error.h"
#include "ringd/hierarchy.h"
#include "ringd/nccl_local_group.h"
#include "testing/check.h"
#include "testing/ranks.h"

namespace ringd {
namespace {

template <typename Call>
void expect_error(ErrorCode code, const std::string& needle, Call call) {
  try {
    call();
    ADD_FAILURE() << "no error; expected " << error_code_name(code) << " with '" << needle << "'";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), code) << error.what();
    EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
  }
}

// ---- no GPU needed ------------------------------------------------------------------------------

TEST(NcclTypes, EveryDtypeAndOpHasItsNcclTwin) {
  EXPECT_EQ(nccl_data_type(DataType::kFloat32), ncclFloat32);
  EXPECT_EQ(nccl_data_type(DataType::kFloat64), ncclFloat64);
  EXPECT_EQ(nccl_data_type(DataType::kFloat16), ncclFloat16);
  EXPECT_EQ(nccl_data_type(DataType::kBFloat16), ncclBfloat16);
  EXPECT_EQ(nccl_data_type(DataType::kInt32), ncclInt32);
  EXPECT_EQ(nccl_data_type(DataType::kInt64), ncclInt64);
  EXPECT_EQ(nccl_data_type(DataType::kUInt8), ncclUint8);
  EXPECT_EQ(nccl_reduce_op(ReduceOp::kSum, DataType::kInt32), ncclSum);
  EXPECT_EQ(nccl_reduce_op(ReduceOp::kProd, DataType::kUInt8), ncclProd);
  EXPECT_EQ(nccl_reduce_op(ReduceOp::kMin, DataType::kFloat16), ncclMin);
  EXPECT_EQ(nccl_reduce_op(ReduceOp::kMax, DataType::kBFloat16), ncclMax);
  EXPECT_EQ(nccl_reduce_op(ReduceOp::kAvg, DataType::kFloat64), ncclAvg);
  for (DataType dtype : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (reduce_op_supported(dtype, op)) {
        EXPECT_NO_THROW(nccl_reduce_op(op, dtype));
      }
    }
  }
}

TEST(NcclTypes, AvgOnIntegersIsRejected) {
  expect_error(ErrorCode::kInvalidArgument, "avg",
               [] { nccl_reduce_op(ReduceOp::kAvg, DataType::kInt64); });
}

TEST(NcclTypes, FailuresMapToRingdCodesWithTheCallSite) {
  EXPECT_EQ(nccl_error_code(ncclInvalidArgument), ErrorCode::kInvalidArgument);
  EXPECT_EQ(nccl_error_code(ncclInvalidUsage), ErrorCode::kInvalidArgument);
  EXPECT_EQ(nccl_error_code(ncclUnhandledCudaError), ErrorCode::kIo);
  EXPECT_EQ(nccl_error_code(ncclSystemError), ErrorCode::kIo);
  EXPECT_EQ(nccl_error_code(ncclRemoteError), ErrorCode::kPeerLost);
  EXPECT_EQ(nccl_error_code(ncclInternalError), ErrorCode::kInternal);
  expect_error(ErrorCode::kInvalidArgument, "nccl_local_group_test.cc",
               [] { RINGD_NCCL_CHECK(ncclInvalidArgument, "device " << 3); });
  expect_error(ErrorCode::kInvalidArgument, "device 3: ncclInvalidArgument failed",
               [] { RINGD_NCCL_CHECK(ncclInvalidArgument, "device " << 3); });
}

TEST(NcclLocalGroup, RejectsBadDeviceListsBeforeTouchingAGpu) {
  expect_error(ErrorCode::kInvalidArgument, "no CUDA devices given",
               [] { make_nccl_local_group({}); });
  expect_error(ErrorCode::kInvalidArgument, "appears twice", [] { make_nccl_local_group({0, 0}); });
  expect_error(ErrorCode::kInvalidArgument, "negative", [] { make_nccl_local_group({-1}); });
  NcclLocalGroupOptions options;
  options.staging_piece_bytes = 0;
  expect_error(ErrorCode::kInvalidArgument, "staging piece",
               [&] { make_nccl_local_group({0}, options); });
  for (int spin_us : {-2, 10001}) {
    NcclLocalGroupOptions spin;
    spin.spin_us = spin_us;
    expect_error(ErrorCode::kInvalidArgument, "spin_us " + std::to_string(spin_us),
                 [&] { make_nccl_local_group({0}, spin); });
  }
}

TEST(NcclLocalGroup, WithoutAGpuTheFactoryFailsAsUnavailable) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  expect_error(ErrorCode::kUnavailable, "no usable CUDA device",
               [] { make_nccl_local_group({0}); });
}

// ---- on GPUs ------------------------------------------------------------------------------------

// Skips the test unless `needed` GPUs are present ("no CUDA device: ..." is what
// scripts/test.sh quotes in its summary).
#define REQUIRE_GPUS(needed)                                                                 \
  do {                                                                                       \
    const int gpus_here_ = cuda_device_count();                                              \
    if (gpus_here_ == 0) GTEST_SKIP() << "no CUDA device: " << cuda_device_status();         \
    if (gpus_here_ < (needed))                                                               \
      GTEST_SKIP() << "needs " << (needed) << " CUDA devices, this host has " << gpus_here_; \
  } while (0)

std::vector<int> gpu_range(int first, int count) {
  std::vector<int> ids(count);
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

// L device buffers of a group, with host-side helpers.
struct GpuBuffers {
  LocalGroup& group;
  std::vector<std::shared_ptr<void>> memory;
  std::vector<DeviceBuffer> buffers;
  GpuBuffers(LocalGroup& g, size_t bytes) : group(g) {
    for (int d = 0; d < g.size(); ++d) {
      memory.push_back(g.allocate(d, bytes));
      buffers.push_back({memory.back().get(), d});
    }
  }
  void put(int d, const std::vector<unsigned char>& bytes) {
    group.upload(buffers[d], bytes.data(), bytes.size());
  }
  std::vector<unsigned char> get(int d, size_t bytes) {
    std::vector<unsigned char> out(bytes);
    group.download(out.data(), buffers[d], bytes);
    return out;
  }
};

std::vector<unsigned char> input(ReduceOp op, int rank, size_t count, DataType dtype) {
  auto bytes = testing::make_input(op, rank, count, dtype);
  bytes.resize(count * dtype_size(dtype));
  return bytes;
}

int local_sizes() { return std::min(cuda_device_count(), 8); }

TEST(NcclLocalGroupOnGpu, ReduceToLeaderAndBroadcastEveryDtypeAndOp) {
  REQUIRE_GPUS(1);
  for (int devices = 1; devices <= local_sizes(); ++devices) {
    auto group = make_nccl_local_group(gpu_range(0, devices));
    for (DataType dtype : kAllDataTypes) {
      for (ReduceOp op : kAllReduceOps) {
        if (!reduce_op_supported(dtype, op)) continue;
        const double tolerance = op == ReduceOp::kAvg ? testing::avg_tolerance(dtype) : 0.0;
        for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{1021}, size_t{262147}}) {
          const size_t bytes = count * dtype_size(dtype);
          GpuBuffers gpu(*group, bytes);
          const int leader = devices - 1;
          for (int d = 0; d < devices; ++d) gpu.put(d, input(op, d, count, dtype));
          group->reduce_to_leader(gpu.buffers, 0, count, dtype, op, leader);
          const auto result = gpu.get(leader, bytes);
          ASSERT_EQ(testing::first_mismatch(
                        result.data(), count, dtype, tolerance,
                        [&](size_t i) { return testing::expected_value(op, devices, i); }),
                    "")
              << devices << " GPUs, " << dtype_name(dtype) << " " << reduce_op_name(op)
              << ", count " << count;
          for (int d = 0; d < devices - 1; ++d) {
            ASSERT_EQ(gpu.get(d, bytes), input(op, d, count, dtype)) << "device " << d;
          }
          group->broadcast_from_leader(gpu.buffers, 0, count, dtype, leader);
          for (int d = 0; d < devices; ++d) ASSERT_EQ(gpu.get(d, bytes), result) << "device " << d;
        }
      }
    }
  }
}

TEST(NcclLocalGroupOnGpu, ReduceScatterThenAllgatherEvenAndUnevenShards) {
  REQUIRE_GPUS(1);
  for (int devices = 1; devices <= local_sizes(); ++devices) {
    auto group = make_nccl_local_group(gpu_range(0, devices));
    for (size_t count :
         {size_t{0}, size_t(devices * 1000), size_t(devices * 1000 + 1), size_t{7}}) {
      const DataType dtype = DataType::kInt32;
      const size_t first = 5;  // shards start mid-buffer
      const size_t bytes = (first + count) * 4;
      GpuBuffers gpu(*group, bytes);
      for (int d = 0; d < devices; ++d) {
        auto bytes_d = input(ReduceOp::kSum, d, first + count, dtype);
        gpu.put(d, bytes_d);
      }
      const ShardLayout shards = ShardLayout::even(first, count, devices);
      group->reduce_scatter(gpu.buffers, shards, dtype, ReduceOp::kSum);
      for (int d = 0; d < devices; ++d) {
        const auto got = gpu.get(d, bytes);
        ASSERT_EQ(
            testing::first_mismatch(got.data() + shards.first(d) * 4, shards.count(d), dtype, 0,
                                    [&](size_t i) {
                                      return testing::expected_value(ReduceOp::kSum, devices,
                                                                     shards.first(d) + i);
                                    }),
            "")
            << devices << " GPUs, count " << count << ", shard " << d;
      }
      group->allgather(gpu.buffers, shards, dtype);
      for (int d = 0; d < devices; ++d) {
        const auto got = gpu.get(d, bytes);
        ASSERT_EQ(testing::first_mismatch(got.data() + first * 4, count, dtype, 0,
                                          [&](size_t i) {
                                            return testing::expected_value(ReduceOp::kSum, devices,
                                                                           first + i);
                                          }),
                  "")
            << devices << " GPUs, count " << count << ", device " << d;
      }
    }
  }
}

// Every wait for a copy either looks at its event until the copy is done (spin 10 ms) or sleeps
// at once (0), or does what RINGD_SPIN_US says (-1): the same bytes arrive each way.
void check_staging_round_trips(int spin_us) {
  SCOPED_TRACE("spin_us " + std::to_string(spin_us));
  const int devices = local_sizes();
  NcclLocalGroupOptions options;
  options.staging_piece_bytes = 4096;
  options.spin_us = spin_us;
  auto group = make_nccl_local_group(gpu_range(0, devices), options);
  const size_t count = 10000;  // uint8: pieces of 4096, the last one short
  GpuBuffers gpu(*group, count);
  std::vector<std::vector<unsigned char>> original(devices);
  for (int d = 0; d < devices; ++d) {
    original[d].resize(count);
    for (size_t i = 0; i < count; ++i) original[d][i] = static_cast<unsigned char>(d * 13 + i);
    gpu.put(d, original[d]);
  }
  std::vector<HostPiece> pieces;
  for (int d = devices - 1; d >= 0; --d) {
    for (size_t first = 0; first < count; first += 4096) {
      pieces.push_back({d, first, std::min<size_t>(4096, count - first)});
    }
  }
  for (int round = 0; round < 3; ++round) {
    auto staging = group->stage(gpu.buffers, pieces, DataType::kUInt8, HostAccess::kReadWrite);
    for (size_t p = 0; p < pieces.size(); ++p) {
      auto* host = static_cast<unsigned char*>(staging->acquire(p));
      for (size_t i = 0; i < pieces[p].count; ++i) {
        ASSERT_EQ(host[i], static_cast<unsigned char>(
                               original[pieces[p].device][pieces[p].first + i] + round))
            << "round " << round << " piece " << p << " byte " << i;
        ++host[i];
      }
      staging->release(p);
    }
    staging->finish();
  }
  for (int d = 0; d < devices; ++d) {
    const auto got = gpu.get(d, count);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(got[i], static_cast<unsigned char>(original[d][i] + 3)) << d << " " << i;
    }
  }
}

TEST(NcclLocalGroupOnGpu, StagingRoundTripsPiecesOnEveryDevice) {
  REQUIRE_GPUS(1);
  for (int spin_us : {-1, 0, 10000}) check_staging_round_trips(spin_us);
}

// Nodes as threads over inproc, each an NcclLocalGroup: over disjoint GPUs when there are enough,
// else one GPU per node, all on GPU 0 (single-device groups never call NCCL collectives, so the
// nodes' groups cannot wait on each other inside a GPU).
void check_hierarchy(int nodes, int devices, Hierarchy strategy) {
  const bool shared = cuda_device_count() < nodes * devices;
  ASSERT_TRUE(!shared || devices == 1);
  NcclLocalGroupOptions group_options;
  group_options.staging_piece_bytes = 64 << 10;  // many pieces from 64K elements of float up
  HierarchyOptions options;
  options.strategy = strategy;
  const int world = nodes * devices;
  const std::vector<size_t> counts = {0, 1, 13, 65537, (1 << 20) + 3};
  std::deque<testing::RankOutputs> outputs;
  for (size_t c = 0; c < counts.size(); ++c) outputs.emplace_back(world);
  testing::run_ranks(testing::Transport::kInproc, nodes, [&](Context& ctx) {
    auto group =
        make_nccl_local_group(gpu_range(shared ? 0 : ctx.rank() * devices, devices), group_options);
    GpuBuffers gpu(*group, counts.back() * 4);
    for (size_t c = 0; c < counts.size(); ++c) {
      const size_t count = counts[c];
      for (int d = 0; d < devices; ++d) {
        gpu.put(d, input(ReduceOp::kSum, ctx.rank() * devices + d, count, DataType::kFloat32));
      }
      hierarchical_allreduce(ctx, *group, gpu.buffers, count, DataType::kFloat32, ReduceOp::kSum,
                             options);
      for (int d = 0; d < devices; ++d) {
        const auto got = gpu.get(d, count * 4);
        EXPECT_EQ(testing::first_mismatch(
                      got.data(), count, DataType::kFloat32, 0,
                      [&](size_t i) { return testing::expected_value(ReduceOp::kSum, world, i); }),
                  "")
            << "node " << ctx.rank() << " device " << d << " count " << count;
        outputs[c].put(ctx.rank() * devices + d, got.data(), got.size());
      }
    }
    const size_t count = 4099;
    const int root = world - 1;
    for (int d = 0; d < devices; ++d) {
      std::vector<unsigned char> bytes(count * 4, 0);
      if (ctx.rank() * devices + d == root)
        bytes = input(ReduceOp::kMax, root, count, DataType::kFloat32);
      gpu.put(d, bytes);
    }
    hierarchical_broadcast(ctx, *group, gpu.buffers, count, DataType::kFloat32, root / devices,
                           root % devices, options);
    for (int d = 0; d < devices; ++d) {
      EXPECT_EQ(gpu.get(d, count * 4), input(ReduceOp::kMax, root, count, DataType::kFloat32))
          << "broadcast, node " << ctx.rank() << " device " << d;
    }
  });
  for (size_t c = 0; c < counts.size(); ++c) {
    EXPECT_EQ(outputs[c].differences(), "") << "count " << counts[c];
  }
}

TEST(NcclLocalGroupOnGpu, HierarchyOneGpuPerNode) {
  REQUIRE_GPUS(1);
  for (Hierarchy strategy : {Hierarchy::kReduceBcast, Hierarchy::kRsAg})
    check_hierarchy(3, 1, strategy);
}

TEST(NcclLocalGroupOnGpu, HierarchySeveralGpusPerNode) {
  REQUIRE_GPUS(4);
  const int devices = std::min(cuda_device_count() / 2, 4);
  for (Hierarchy strategy : {Hierarchy::kReduceBcast, Hierarchy::kRsAg}) {
    check_hierarchy(2, devices, strategy);
  }
}

}  // namespace
}  // namespace ringd

#else  // !RINGD_HAVE_NCCL

TEST(NcclLocalGroup, NotBuilt) {
  GTEST_SKIP() << "ringd was configured without NCCL (RINGD_HAVE_NCCL=0): no NCCL local group; "
                  "install NCCL (or set NCCL_HOME) and configure with -DRINGD_WITH_CUDA=ON";
}

#endif
