// Hierarchical allreduce / broadcast / allgather (ringd/hierarchy.h): nodes 1..4 x devices 1..8 x
// counts x dtypes x both strategies, over inproc and tcp; device d of node r is global rank
// r * L + d, expected values in closed form, every device of every node bitwise equal.
#include <gtest/gtest.h>

#include <deque>
#include <tuple>

#include "ringd/hierarchy.h"
#include "testing/check.h"
#include "testing/local_devices.h"

namespace ringd {
namespace {

using testing::NodeDevices;
using testing::Transport;

HierarchyOptions options_for(Hierarchy strategy) {
  HierarchyOptions options;
  options.strategy = strategy;
  options.inter_node.segment_bytes = 1000;  // several segments even for small pieces
  options.inter_node.segments_in_flight = 2;
  options.pipeline_chunk_bytes = 64 << 10;  // 65537 floats: 4 chunks through the pipeline
  return options;
}

// Runs a hierarchical allreduce per count and checks every device's values and bits.
void check_allreduce(Transport transport, int nodes, int devices, const std::vector<size_t>& counts,
                     DataType dtype, ReduceOp op, const HierarchyOptions& options) {
  const size_t elem = dtype_size(dtype);
  const size_t max_count = *std::max_element(counts.begin(), counts.end());
  const double tolerance = op == ReduceOp::kAvg ? testing::avg_tolerance(dtype) : 0.0;
  const int world = nodes * devices;
  std::deque<testing::RankOutputs> outputs;
  for (size_t c = 0; c < counts.size(); ++c) outputs.emplace_back(world);
  testing::run_nodes(
      transport, nodes, devices, max_count * elem, [&](Context& ctx, NodeDevices& node) {
        for (size_t c = 0; c < counts.size(); ++c) {
          const size_t count = counts[c];
          for (int d = 0; d < devices; ++d) {
            const auto input = testing::make_input(op, node.global_rank(ctx, d), count, dtype);
            std::memcpy(node.memory[d].data(), input.data(), count * elem);
          }
          hierarchical_allreduce(ctx, *node.group, node.buffers, count, dtype, op, options);
          for (int d = 0; d < devices; ++d) {
            const std::string bad = testing::first_mismatch(
                node.memory[d].data(), count, dtype, tolerance,
                [&](size_t i) { return testing::expected_value(op, world, i); });
            EXPECT_EQ(bad, "") << "node " << ctx.rank() << " device " << d << " count " << count;
            EXPECT_EQ(node.memory[d][max_count * elem], 0x5A) << "past the end";
            outputs[c].put(node.global_rank(ctx, d), node.memory[d].data(), count * elem);
          }
        }
      });
  for (size_t c = 0; c < counts.size(); ++c) {
    EXPECT_EQ(outputs[c].differences(), "") << "count " << counts[c];
  }
}

std::string strategy_label(Hierarchy strategy) {
  return strategy == Hierarchy::kRsAg ? "rsag" : "reducebcast";
}

// ---- shapes: nodes x devices x strategy, float sum, 0, 1, primes, uneven shards ---------------

using ShapeParam = std::tuple<Transport, int, int, Hierarchy>;
class HierarchicalShapes : public ::testing::TestWithParam<ShapeParam> {};

TEST_P(HierarchicalShapes, AllreduceIsExactAndIdenticalOnEveryDevice) {
  const auto [transport, nodes, devices, strategy] = GetParam();
  check_allreduce(transport, nodes, devices, {0, 1, 2, 3, 7, 13, 61, 1021, 65537},
                  DataType::kFloat32, ReduceOp::kSum, options_for(strategy));
}

TEST_P(HierarchicalShapes, BroadcastFromEveryRootDevice) {
  const auto [transport, nodes, devices, strategy] = GetParam();
  const std::vector<size_t> counts = {0, 1, 13, 4099};
  testing::run_nodes(transport, nodes, devices, 4099 * 4, [&](Context& ctx, NodeDevices& node) {
    for (int root = 0; root < nodes * devices; ++root) {
      for (size_t count : counts) {
        for (int d = 0; d < devices; ++d) {
          float* buf = reinterpret_cast<float*>(node.memory[d].data());
          for (size_t i = 0; i < count; ++i) {
            buf[i] = node.global_rank(ctx, d) == root ? static_cast<float>(root * 1000 + i % 997)
                                                      : -1.0f;
          }
        }
        hierarchical_broadcast(ctx, *node.group, node.buffers, count, DataType::kFloat32,
                               root / devices, root % devices, options_for(strategy));
        for (int d = 0; d < devices; ++d) {
          ASSERT_EQ(testing::first_mismatch(node.memory[d].data(), count, DataType::kFloat32, 0,
                                            [&](size_t i) { return root * 1000.0 + i % 997; }),
                    "")
              << "node " << ctx.rank() << " device " << d << " root " << root << " count " << count;
        }
      }
    }
  });
}

TEST_P(HierarchicalShapes, AllgatherPutsEveryDeviceBlockInRankOrder) {
  const auto [transport, nodes, devices, strategy] = GetParam();
  const int world = nodes * devices;
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1031}}) {
    testing::run_nodes(
        transport, nodes, devices, count * world, [&](Context& ctx, NodeDevices& node) {
          for (int d = 0; d < devices; ++d) {
            const int rank = node.global_rank(ctx, d);
            std::memset(node.memory[d].data(), 0xEE, count * world);
            for (size_t i = 0; i < count; ++i) {
              node.memory[d][rank * count + i] = static_cast<uint8_t>((rank * 31 + i) % 251);
            }
          }
          hierarchical_allgather(ctx, *node.group, node.buffers, count, DataType::kUInt8,
                                 options_for(strategy));
          for (int d = 0; d < devices; ++d) {
            ASSERT_EQ(testing::first_mismatch(
                          node.memory[d].data(), count * world, DataType::kUInt8, 0,
                          [&](size_t j) {
                            return static_cast<double>((j / count * 31 + j % count) % 251);
                          }),
                      "")
                << "node " << ctx.rank() << " device " << d << " count " << count;
            ASSERT_EQ(node.memory[d][count * world], 0x5A) << "past the end";
          }
        });
  }
}

std::string shape_name(const ::testing::TestParamInfo<ShapeParam>& info) {
  const auto [transport, nodes, devices, strategy] = info.param;
  return std::string(testing::transport_name(transport)) + "_" + std::to_string(nodes) + "nodes_" +
         std::to_string(devices) + "devices_" + strategy_label(strategy);
}

INSTANTIATE_TEST_SUITE_P(Inproc, HierarchicalShapes,
                         ::testing::Combine(::testing::Values(Transport::kInproc),
                                            ::testing::Range(1, 5), ::testing::Range(1, 9),
                                            ::testing::Values(Hierarchy::kReduceBcast,
                                                              Hierarchy::kRsAg)),
                         shape_name);
INSTANTIATE_TEST_SUITE_P(Tcp, HierarchicalShapes,
                         ::testing::Combine(::testing::Values(Transport::kTcp),
                                            ::testing::Values(2, 4), ::testing::Values(1, 3),
                                            ::testing::Values(Hierarchy::kReduceBcast,
                                                              Hierarchy::kRsAg)),
                         shape_name);

// ---- every dtype x op --------------------------------------------------------------------------

using TypeParam = std::tuple<Transport, DataType, ReduceOp, Hierarchy>;
class HierarchicalTypes : public ::testing::TestWithParam<TypeParam> {};

TEST_P(HierarchicalTypes, AllreduceEveryDtypeAndOp) {
  const auto [transport, dtype, op, strategy] = GetParam();
  if (!reduce_op_supported(dtype, op)) GTEST_SKIP() << "avg is defined for float types only";
  // 3 x 3: no power of two anywhere; 1 x 5: avg through the local group alone.
  check_allreduce(transport, 3, 3, {1, 31, 1021, 20011}, dtype, op, options_for(strategy));
  if (transport == Transport::kInproc) {
    check_allreduce(transport, 1, 5, {1, 1021}, dtype, op, options_for(strategy));
    check_allreduce(transport, 4, 2, {5, 1021}, dtype, op, options_for(strategy));
  }
}

std::string type_name(const ::testing::TestParamInfo<TypeParam>& info) {
  const auto [transport, dtype, op, strategy] = info.param;
  return std::string(testing::transport_name(transport)) + "_" + dtype_name(dtype) + "_" +
         reduce_op_name(op) + "_" + strategy_label(strategy);
}

INSTANTIATE_TEST_SUITE_P(
    Inproc, HierarchicalTypes,
    ::testing::Combine(::testing::Values(Transport::kInproc), ::testing::ValuesIn(kAllDataTypes),
                       ::testing::ValuesIn(kAllReduceOps),
                       ::testing::Values(Hierarchy::kReduceBcast, Hierarchy::kRsAg)),
    type_name);
INSTANTIATE_TEST_SUITE_P(
    Tcp, HierarchicalTypes,
    ::testing::Combine(::testing::Values(Transport::kTcp),
                       ::testing::Values(DataType::kFloat16, DataType::kInt64),
                       ::testing::Values(ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin),
                       ::testing::Values(Hierarchy::kReduceBcast, Hierarchy::kRsAg)),
    type_name);

// ---- >= 64 MB ----------------------------------------------------------------------------------

class HierarchicalLarge : public ::testing::TestWithParam<ShapeParam> {};

TEST_P(HierarchicalLarge, SixtyFourMegabytesPerDevice) {
  const auto [transport, nodes, devices, strategy] = GetParam();
  const size_t count = (64u << 20) / 4 + 5;  // uneven shards and ring chunks
  const int world = nodes * devices;
  HierarchyOptions options;
  options.strategy = strategy;
  testing::run_nodes(transport, nodes, devices, count * 4, [&](Context& ctx, NodeDevices& node) {
    for (int d = 0; d < devices; ++d) {
      float* buf = reinterpret_cast<float*>(node.memory[d].data());
      const int rank = node.global_rank(ctx, d);
      for (size_t i = 0; i < count; ++i) {
        buf[i] = static_cast<float>(testing::input_value(ReduceOp::kSum, rank, i));
      }
    }
    hierarchical_allreduce(ctx, *node.group, node.buffers, count, DataType::kFloat32,
                           ReduceOp::kSum, options);
    // The expected value has period 4 in i (values.h), so compare against 4 precomputed ones;
    // the sums are exact, so equal values on every device are equal bits.
    float expected[4];
    for (size_t i = 0; i < 4; ++i) {
      expected[i] = static_cast<float>(testing::expected_value(ReduceOp::kSum, world, i));
    }
    for (int d = 0; d < devices; ++d) {
      const float* buf = reinterpret_cast<const float*>(node.memory[d].data());
      size_t wrong = 0, first_wrong = 0;
      for (size_t i = 0; i < count; ++i) {
        if (buf[i] != expected[i % 4] && wrong++ == 0) first_wrong = i;
      }
      ASSERT_EQ(wrong, 0u) << "node " << ctx.rank() << " device " << d << ": first at "
                           << first_wrong << " got " << buf[first_wrong];
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, HierarchicalLarge,
                         ::testing::Values(std::tuple{Transport::kInproc, 2, 4, Hierarchy::kRsAg},
                                           std::tuple{Transport::kTcp, 3, 2,
                                                      Hierarchy::kReduceBcast}),
                         shape_name);

// ---- parts: several allreduces as one pipeline ----------------------------------------------

// Parts of different counts, dtypes and ops in one pipeline: each part's `before` writes its
// inputs (so a local step that ran before it would reduce stale bytes) and its `after` copies the
// results out (so one that ran before the last local step out would copy unfinished ones); each
// part must end as its own hierarchical_allreduce would, on every device of every node.
using PartsParam = std::tuple<Transport, int, int, Hierarchy>;
class HierarchicalParts : public ::testing::TestWithParam<PartsParam> {};

TEST_P(HierarchicalParts, EveryPartEndsAsItsOwnAllreduce) {
  const auto [transport, nodes, devices, strategy] = GetParam();
  struct Spec {
    size_t count;
    DataType dtype;
    ReduceOp op;
  };
  // Runs of one dtype and op (f32 sum, f64 avg) that the pipeline's 16384-float chunks cut
  // across part boundaries on host memory, a part of 0 inside a run, and runs of one part.
  const std::vector<Spec> specs = {
      {65537, DataType::kFloat32, ReduceOp::kSum}, {0, DataType::kFloat32, ReduceOp::kSum},
      {20000, DataType::kFloat32, ReduceOp::kSum}, {7, DataType::kFloat32, ReduceOp::kSum},
      {30000, DataType::kFloat32, ReduceOp::kSum}, {13, DataType::kInt32, ReduceOp::kMax},
      {40000, DataType::kFloat64, ReduceOp::kAvg}, {25000, DataType::kFloat64, ReduceOp::kAvg},
      {1, DataType::kFloat32, ReduceOp::kProd},    {3000, DataType::kFloat16, ReduceOp::kSum}};
  const int world = nodes * devices;
  std::deque<testing::RankOutputs> outputs;
  for (size_t p = 0; p < specs.size(); ++p) outputs.emplace_back(world);
  testing::run_nodes(transport, nodes, devices, 0, [&](Context& ctx, NodeDevices& node) {
    // memory[p][d]: part p's buffer on device d; copied[p][d]: what its `after` saw.
    std::vector<std::vector<std::vector<unsigned char>>> memory(specs.size());
    std::vector<std::vector<std::vector<unsigned char>>> copied(specs.size());
    std::vector<HierarchicalPart> parts(specs.size());
    for (size_t p = 0; p < specs.size(); ++p) {
      const Spec& spec = specs[p];
      const size_t bytes = spec.count * dtype_size(spec.dtype);
      for (int d = 0; d < devices; ++d) memory[p].emplace_back(bytes + 1, 0x5A);
      copied[p].resize(static_cast<size_t>(devices));
      HierarchicalPart& part = parts[p];
      for (int d = 0; d < devices; ++d) part.buffers.push_back({memory[p][d].data(), d});
      part.count = spec.count;
      part.dtype = spec.dtype;
      part.op = spec.op;
      part.before = [&, p, spec] {
        for (int d = 0; d < devices; ++d) {
          const auto input =
              testing::make_input(spec.op, node.global_rank(ctx, d), spec.count, spec.dtype);
          std::memcpy(memory[p][d].data(), input.data(), spec.count * dtype_size(spec.dtype));
        }
      };
      part.after = [&, p, spec] {
        for (int d = 0; d < devices; ++d) {
          copied[p][d].assign(memory[p][d].begin(),
                              memory[p][d].begin() + spec.count * dtype_size(spec.dtype));
        }
      };
    }
    HierarchyOptions options = options_for(strategy);
    hierarchical_allreduce_parts(ctx, *node.group, parts, options);
    for (size_t p = 0; p < specs.size(); ++p) {
      const Spec& spec = specs[p];
      const double tolerance = spec.op == ReduceOp::kAvg ? testing::avg_tolerance(spec.dtype) : 0.0;
      for (int d = 0; d < devices; ++d) {
        ASSERT_EQ(copied[p][d].size(), spec.count * dtype_size(spec.dtype)) << "part " << p;
        const std::string bad = testing::first_mismatch(
            copied[p][d].data(), spec.count, spec.dtype, tolerance,
            [&](size_t i) { return testing::expected_value(spec.op, world, i); });
        EXPECT_EQ(bad, "") << "part " << p << " node " << ctx.rank() << " device " << d;
        EXPECT_EQ(memory[p][d].back(), 0x5A) << "past the end of part " << p;
        outputs[p].put(node.global_rank(ctx, d), copied[p][d].data(), copied[p][d].size());
      }
    }
  });
  for (size_t p = 0; p < specs.size(); ++p) EXPECT_EQ(outputs[p].differences(), "") << p;
}

// On host memory, consecutive parts of one dtype and op go across nodes as the chunks of one
// buffer: one allreduce_list per chunk, not one allreduce per part (or per shard).
TEST(HierarchicalJoinedParts, OneAllreducePerChunkNotPerPart) {
  for (Hierarchy strategy : {Hierarchy::kReduceBcast, Hierarchy::kRsAg}) {
    SCOPED_TRACE(strategy_label(strategy));
    const int nodes = 2, devices = 2;
    // 33000 floats in 16384-float chunks: two chunks (the short tail joins the second).
    const std::vector<size_t> counts = {10000, 10000, 0, 10000, 3000};
    testing::run_nodes(Transport::kInproc, nodes, devices, 0, [&](Context& ctx, NodeDevices& node) {
      std::vector<std::vector<std::vector<float>>> memory(counts.size());
      std::vector<HierarchicalPart> parts(counts.size());
      for (size_t p = 0; p < counts.size(); ++p) {
        for (int d = 0; d < devices; ++d) {
          memory[p].emplace_back(counts[p], static_cast<float>(node.global_rank(ctx, d) + 1));
          parts[p].buffers.push_back({memory[p][d].data(), d});
        }
        parts[p].count = counts[p];
        parts[p].dtype = DataType::kFloat32;
        parts[p].op = ReduceOp::kSum;
      }
      HierarchyOptions options = options_for(strategy);
      options.check_agreement = false;  // its own allreduces would count too
      hierarchical_allreduce_parts(ctx, *node.group, parts, options);  // the tuner runs here
      for (auto& part : memory) {
        for (auto& buffer : part) std::fill(buffer.begin(), buffer.end(), 1.0f);
      }
      const uint64_t before = ctx.next_operation_id();
      hierarchical_allreduce_parts(ctx, *node.group, parts, options);
      EXPECT_EQ(ctx.next_operation_id() - before, 1u + 2u) << "operations across nodes";
      for (size_t p = 0; p < counts.size(); ++p) {
        for (int d = 0; d < devices; ++d) {
          for (size_t i = 0; i < counts[p]; ++i) {
            ASSERT_EQ(memory[p][d][i], static_cast<float>(nodes * devices))
                << "part " << p << " device " << d << " element " << i;
          }
        }
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Inproc, HierarchicalParts,
                         ::testing::Combine(::testing::Values(Transport::kInproc),
                                            ::testing::Values(1, 2, 3), ::testing::Values(1, 3),
                                            ::testing::Values(Hierarchy::kReduceBcast,
                                                              Hierarchy::kRsAg)));
INSTANTIATE_TEST_SUITE_P(Tcp, HierarchicalParts,
                         ::testing::Combine(::testing::Values(Transport::kTcp),
                                            ::testing::Values(3), ::testing::Values(2),
                                            ::testing::Values(Hierarchy::kRsAg)));

}  // namespace
}  // namespace ringd
