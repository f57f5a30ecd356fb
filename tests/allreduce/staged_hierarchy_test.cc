// The hierarchical collectives through two-slot host staging, as a GPU local group runs them but
// with no GPU: a CpuLocalGroup whose stage() is a DoubleBufferedStaging over the fake copier
// (testing/fake_piece_copier.h; copies run only when waited for, so a missing wait shows up as
// wrong values) and whose staging piece is tiny, so every collective crosses many pieces, in
// pipeline chunks of three pieces (the local steps on a helper thread meanwhile).
// Closed-form values on every device of every node, bitwise identical everywhere; no copy larger
// than a piece in allreduce and broadcast.
#include <gtest/gtest.h>

#include <deque>
#include <tuple>

#include "device/cpu_local_group.h"
#include "device/double_buffered_staging.h"
#include "ringd/hierarchy.h"
#include "testing/check.h"
#include "testing/fake_piece_copier.h"
#include "testing/ranks.h"

namespace ringd {
namespace {

constexpr size_t kPieceBytes = 1000;  // not a multiple of 8: pieces of whole elements

class StagedCpuLocalGroup : public device::CpuLocalGroup {
 public:
  explicit StagedCpuLocalGroup(int devices) : CpuLocalGroup(devices, {}) {}
  std::string kind() const override { return "staged-cpu"; }
  size_t staging_piece_bytes() const override { return kPieceBytes; }
  std::unique_ptr<HostStaging> stage(DeviceBuffers buffers, std::vector<HostPiece> pieces,
                                     DataType dtype, HostAccess access) override {
    return std::make_unique<device::DoubleBufferedStaging>(copier, buffers, std::move(pieces),
                                                           dtype, access);
  }
  testing::FakePieceCopier copier;
};

struct Node {
  StagedCpuLocalGroup group;
  std::vector<std::vector<unsigned char>> memory;
  std::vector<DeviceBuffer> buffers;
  Node(int devices, size_t bytes) : group(devices), memory(devices) {
    for (int d = 0; d < devices; ++d) {
      memory[d].assign(bytes, 0x5A);
      buffers.push_back({memory[d].data(), d});
    }
  }
};

using Param = std::tuple<int, int, Hierarchy>;  // nodes, devices, strategy
class StagedHierarchy : public ::testing::TestWithParam<Param> {};

TEST_P(StagedHierarchy, AllreduceThroughManyPieces) {
  const auto [nodes, devices, strategy] = GetParam();
  const int world = nodes * devices;
  HierarchyOptions options;
  options.strategy = strategy;
  options.pipeline_chunk_bytes = 3000;  // chunks of several pieces, through the pipeline
  for (auto [dtype, op] : {std::pair{DataType::kFloat32, ReduceOp::kSum},
                           std::pair{DataType::kFloat64, ReduceOp::kAvg},
                           std::pair{DataType::kInt32, ReduceOp::kMax}}) {
    const size_t elem = dtype_size(dtype);
    const double tolerance = op == ReduceOp::kAvg ? testing::avg_tolerance(dtype) : 0.0;
    const std::vector<size_t> counts = {0, 1, 13, 1021, 20011};
    std::deque<testing::RankOutputs> outputs;
    for (size_t c = 0; c < counts.size(); ++c) outputs.emplace_back(world);
    testing::run_ranks(testing::Transport::kInproc, nodes, [&](Context& ctx) {
      Node node(devices, 20011 * elem);
      for (size_t c = 0; c < counts.size(); ++c) {
        for (int d = 0; d < devices; ++d) {
          const auto input = testing::make_input(op, ctx.rank() * devices + d, counts[c], dtype);
          std::memcpy(node.memory[d].data(), input.data(), counts[c] * elem);
        }
        hierarchical_allreduce(ctx, node.group, node.buffers, counts[c], dtype, op, options);
        for (int d = 0; d < devices; ++d) {
          EXPECT_EQ(testing::first_mismatch(
                        node.memory[d].data(), counts[c], dtype, tolerance,
                        [&](size_t i) { return testing::expected_value(op, world, i); }),
                    "")
              << dtype_name(dtype) << " " << reduce_op_name(op) << " node " << ctx.rank()
              << " device " << d << " count " << counts[c];
          outputs[c].put(ctx.rank() * devices + d, node.memory[d].data(), counts[c] * elem);
        }
      }
      EXPECT_LE(node.group.copier.largest_copy, kPieceBytes);
      EXPECT_EQ(node.group.copier.violations, std::vector<std::string>{});
    });
    for (size_t c = 0; c < counts.size(); ++c) {
      EXPECT_EQ(outputs[c].differences(), "") << dtype_name(dtype) << " count " << counts[c];
    }
  }
}

TEST_P(StagedHierarchy, BroadcastAndAllgatherThroughStaging) {
  const auto [nodes, devices, strategy] = GetParam();
  const int world = nodes * devices;
  HierarchyOptions options;
  options.strategy = strategy;
  options.pipeline_chunk_bytes = 3000;
  testing::run_ranks(testing::Transport::kInproc, nodes, [&](Context& ctx) {
    const size_t count = 4099;
    Node node(devices, count * 4 * world);
    for (int root = 0; root < world; root += std::max(1, world / 3)) {
      for (int d = 0; d < devices; ++d) {
        float* buf = reinterpret_cast<float*>(node.memory[d].data());
        for (size_t i = 0; i < count; ++i) {
          buf[i] =
              ctx.rank() * devices + d == root ? static_cast<float>(root * 1000 + i % 997) : -1.0f;
        }
      }
      hierarchical_broadcast(ctx, node.group, node.buffers, count, DataType::kFloat32,
                             root / devices, root % devices, options);
      for (int d = 0; d < devices; ++d) {
        ASSERT_EQ(testing::first_mismatch(node.memory[d].data(), count, DataType::kFloat32, 0,
                                          [&](size_t i) { return root * 1000.0 + i % 997; }),
                  "")
            << "node " << ctx.rank() << " device " << d << " root " << root;
      }
    }
    EXPECT_LE(node.group.copier.largest_copy, kPieceBytes);

    for (int d = 0; d < devices; ++d) {
      const int rank = ctx.rank() * devices + d;
      int32_t* buf = reinterpret_cast<int32_t*>(node.memory[d].data());
      for (size_t i = 0; i < count * world; ++i) buf[i] = -7;
      for (size_t i = 0; i < count; ++i) buf[rank * count + i] = static_cast<int32_t>(rank * 7 + i);
    }
    hierarchical_allgather(ctx, node.group, node.buffers, count, DataType::kInt32, options);
    for (int d = 0; d < devices; ++d) {
      ASSERT_EQ(testing::first_mismatch(
                    node.memory[d].data(), count * world, DataType::kInt32, 0,
                    [&](size_t j) { return static_cast<double>(j / count * 7 + j % count); }),
                "")
          << "node " << ctx.rank() << " device " << d;
    }
    EXPECT_EQ(node.group.copier.violations, std::vector<std::string>{});
  });
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto [nodes, devices, strategy] = info.param;
  return std::to_string(nodes) + "nodes_" + std::to_string(devices) + "devices_" +
         (strategy == Hierarchy::kRsAg ? "rsag" : "reducebcast");
}

INSTANTIATE_TEST_SUITE_P(Shapes, StagedHierarchy,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values(1, 3, 4),
                                            ::testing::Values(Hierarchy::kReduceBcast,
                                                              Hierarchy::kRsAg)),
                         param_name);

}  // namespace
}  // namespace ringd
