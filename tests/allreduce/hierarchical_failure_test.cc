// What nodes see when a hierarchical collective cannot work: nodes that disagree on the number of
// devices or the count (a clear kMismatch on every node, the context still usable), the same
// without the agreement check (an error within the timeout, never a wrong result), a node that
// dies, and arguments no node could use.
#include <gtest/gtest.h>

#include <chrono>

#include "ringd/collectives.h"
#include "ringd/error.h"
#include "ringd/hierarchy.h"
#include "testing/local_devices.h"

namespace ringd {
namespace {

using namespace std::chrono_literals;
using testing::NodeDevices;
using testing::Transport;

struct Outcome {
  ErrorCode code;
  std::string message;
};

Outcome outcome_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
}

using Param = std::tuple<Transport, Hierarchy>;
class HierarchicalFailures : public ::testing::TestWithParam<Param> {};

// Every node fails with kMismatch naming `what`; then all run a plain allreduce on the same
// context, which must succeed.
void expect_disagreement(Transport transport, Hierarchy strategy,
                         const std::function<int(int)>& devices,
                         const std::function<size_t(int)>& counts, const char* what) {
  constexpr int kNodes = 3;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> messages(kNodes);
  std::vector<float> after(kNodes, 0);
  auto result = testing::run_nodes_collect(
      transport, kNodes, devices, 4096,
      [&](Context& ctx, NodeDevices& node) {
        HierarchyOptions options;
        options.strategy = strategy;
        try {
          hierarchical_allreduce(ctx, *node.group, node.buffers, counts(ctx.rank()),
                                 DataType::kFloat32, ReduceOp::kAvg, options);
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kMismatch) << e.what();
          messages[ctx.rank()] = e.what();
        }
        // The streams are still in step: a plain allreduce on the same context works.
        float one = 1.0f;
        allreduce(ctx, &one, &one, 1, DataType::kFloat32, ReduceOp::kSum);
        after[ctx.rank()] = one;
      },
      2000ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  ASSERT_EQ(result.first(), nullptr) << outcome_of(result.first()).message;
  for (int r = 0; r < kNodes; ++r) {
    EXPECT_NE(messages[r].find(what), std::string::npos) << "node " << r << ": " << messages[r];
    EXPECT_NE(messages[r].find("rank " + std::to_string(r)), std::string::npos) << messages[r];
    EXPECT_EQ(after[r], static_cast<float>(kNodes)) << "context unusable on node " << r;
  }
}

TEST_P(HierarchicalFailures, DifferentDeviceCountsFailEveryNodeClearly) {
  const auto [transport, strategy] = GetParam();
  expect_disagreement(
      transport, strategy, [](int rank) { return rank == 1 ? 2 : 3; }, [](int) { return 100; },
      "disagree on local devices");
}

TEST_P(HierarchicalFailures, DifferentCountsFailEveryNodeClearly) {
  const auto [transport, strategy] = GetParam();
  expect_disagreement(
      transport, strategy, [](int) { return 2; }, [](int rank) { return rank == 2 ? 1000u : 999u; },
      "disagree on count");
}

TEST_P(HierarchicalFailures, WithoutTheCheckDifferentCountsStillFailInBoundedTime) {
  const auto [transport, strategy] = GetParam();
  const auto timeout = 1000ms;
  const auto start = std::chrono::steady_clock::now();
  auto result = testing::run_nodes_collect(
      transport, 3, [](int) { return 2; }, 300000 * 4,
      [&](Context& ctx, NodeDevices& node) {
        HierarchyOptions options;
        options.strategy = strategy;
        options.check_agreement = false;
        options.inter_node.algorithm = AllreduceAlgorithm::kRing;
        options.pipeline_chunk_bytes = 256 << 10;  // different counts: different chunks too
        hierarchical_allreduce(ctx, *node.group, node.buffers, ctx.rank() == 0 ? 200000 : 300000,
                               DataType::kFloat32, ReduceOp::kSum, options);
      },
      timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3 * timeout + 2s);
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_NE(result.errors[rank], nullptr) << "node " << rank << " reported success";
    const Outcome o = outcome_of(result.errors[rank]);
    EXPECT_TRUE(o.code == ErrorCode::kMismatch || o.code == ErrorCode::kTimeout ||
                o.code == ErrorCode::kPeerLost)
        << o.message;
    EXPECT_NE(o.message.find("hierarchical allreduce"), std::string::npos) << o.message;
  }
}

TEST_P(HierarchicalFailures, DeadNodeFailsTheOthersAndIsNamed) {
  const auto [transport, strategy] = GetParam();
  constexpr int kNodes = 4, kVictim = 2;
  const auto timeout = 2000ms;
  const auto start = std::chrono::steady_clock::now();
  auto result = testing::run_nodes_collect(
      transport, kNodes, [](int) { return 2; }, (1 << 20) * 4,
      [&](Context& ctx, NodeDevices& node) {
        HierarchyOptions options;
        options.strategy = strategy;
        options.pipeline_chunk_bytes = 256 << 10;  // the peer dies mid-pipeline
        hierarchical_allreduce(ctx, *node.group, node.buffers, 1, DataType::kFloat32,
                               ReduceOp::kSum, options);
        if (ctx.rank() == kVictim) return;  // its context goes away mid-job
        for (int i = 0; i < 20; ++i) {
          hierarchical_allreduce(ctx, *node.group, node.buffers, 1 << 20, DataType::kFloat32,
                                 ReduceOp::kSum, options);
        }
      },
      timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2 * timeout + 2s);
  EXPECT_EQ(result.errors[kVictim], nullptr);
  for (int rank : {0, 1, 3}) {
    ASSERT_NE(result.errors[rank], nullptr) << "node " << rank << " reported success";
    const Outcome o = outcome_of(result.errors[rank]);
    EXPECT_TRUE(o.code == ErrorCode::kPeerLost || o.code == ErrorCode::kTimeout) << o.message;
  }
  for (int rank : {1, 3}) {  // ring neighbours of the victim see it go
    const Outcome o = outcome_of(result.errors[rank]);
    EXPECT_NE(o.message.find("rank 2"), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("hierarchical allreduce"), std::string::npos) << o.message;
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(testing::transport_name(std::get<0>(info.param))) + "_" +
         (std::get<1>(info.param) == Hierarchy::kRsAg ? "rsag" : "reducebcast");
}

INSTANTIATE_TEST_SUITE_P(All, HierarchicalFailures,
                         ::testing::Combine(::testing::Values(Transport::kInproc, Transport::kTcp),
                                            ::testing::Values(Hierarchy::kReduceBcast,
                                                              Hierarchy::kRsAg)),
                         param_name);

TEST(HierarchicalArguments, RejectedBeforeAnyMessage) {
  testing::run_nodes(Transport::kInproc, 2, 3, 64, [&](Context& ctx, NodeDevices& node) {
    auto code_of = [](auto call) {
      try {
        call();
      } catch (const Error& e) {
        return e.code();
      }
      return ErrorCode::kInternal;
    };
    HierarchyOptions none;
    none.strategy = Hierarchy::kNone;
    EXPECT_EQ(code_of([&] {
                hierarchical_allreduce(ctx, *node.group, node.buffers, 4, DataType::kFloat32,
                                       ReduceOp::kSum, none);
              }),
              ErrorCode::kInvalidArgument);
    const std::vector<DeviceBuffer> two(node.buffers.begin(), node.buffers.begin() + 2);
    EXPECT_EQ(code_of([&] {
                hierarchical_allreduce(ctx, *node.group, two, 4, DataType::kFloat32,
                                       ReduceOp::kSum);
              }),
              ErrorCode::kInvalidArgument);
    EXPECT_EQ(code_of([&] {
                hierarchical_allreduce(ctx, *node.group, node.buffers, 4, DataType::kInt32,
                                       ReduceOp::kAvg);
              }),
              ErrorCode::kInvalidArgument);
    EXPECT_EQ(code_of([&] {
                hierarchical_broadcast(ctx, *node.group, node.buffers, 4, DataType::kFloat32, 2, 0);
              }),
              ErrorCode::kInvalidArgument);
    EXPECT_EQ(code_of([&] {
                hierarchical_broadcast(ctx, *node.group, node.buffers, 4, DataType::kFloat32, 0, 3);
              }),
              ErrorCode::kInvalidArgument);
    // Argument errors leave the context usable.
    hierarchical_allreduce(ctx, *node.group, node.buffers, 4, DataType::kFloat32, ReduceOp::kSum);
  });
  EXPECT_EQ(parse_hierarchy("rs-ag"), Hierarchy::kRsAg);
  EXPECT_EQ(parse_hierarchy("reduce-bcast"), Hierarchy::kReduceBcast);
  EXPECT_EQ(parse_hierarchy("none"), Hierarchy::kNone);
  EXPECT_STREQ(hierarchy_name(Hierarchy::kRsAg), "rs-ag");
  EXPECT_THROW(parse_hierarchy("tree"), Error);
}

}  // namespace
}  // namespace ringd
