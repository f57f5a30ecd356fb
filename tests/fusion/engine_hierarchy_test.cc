// The fusion engine over local devices (EngineOptions::local_group): N nodes as threads, each one
// engine over L CPU devices. Device d of node r is global rank r * L + d; results must equal the
// flat collective over the N x L global ranks, bitwise identical on every device of every node,
// fused or one tensor at a time; and what cannot run over devices says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <tuple>

#include "fusion/engine_test_support.h"
#include "ringd/engine.h"
#include "ringd/error.h"
#include "testing/local_devices.h"

namespace ringd {
namespace {

using testing::NodeDevices;
using testing::Transport;

// Element i of tensor t on global rank g: small integers, so sums are exact in float32.
float input(int g, size_t t, size_t i) {
  return static_cast<float>((g + 1) * (1 + static_cast<int>((i + t) % 7)));
}

// The tensors of one node: tensors[t][d] is tensor t on device d.
struct NodeTensors {
  std::vector<size_t> counts;
  std::vector<std::vector<std::vector<float>>> values;

  NodeTensors(int devices, int first_global) : counts{1, 300, 7, 4096, 0, 100000, 33, 2} {
    for (size_t t = 0; t < counts.size(); ++t) {
      values.emplace_back();
      for (int d = 0; d < devices; ++d) {
        std::vector<float> v(counts[t]);
        for (size_t i = 0; i < counts[t]; ++i) v[i] = input(first_global + d, t, i);
        values[t].push_back(std::move(v));
      }
    }
  }
  Submission allreduce(size_t t, ReduceOp op) {
    Submission s;
    s.name = "grad." + std::to_string(t);
    s.tensor = Tensor{values[t][0].data(), DataType::kFloat32, {static_cast<int64_t>(counts[t])}};
    s.op = op;
    for (size_t d = 1; d < values[t].size(); ++d) s.other_devices.push_back(values[t][d].data());
    return s;
  }
};

using Param = std::tuple<Transport, int, int, size_t, Hierarchy>;  // nodes, devices, threshold
class EngineOverDevices : public ::testing::TestWithParam<Param> {};

TEST_P(EngineOverDevices, AllreducesEqualTheFlatResultOnEveryDevice) {
  const auto [transport, nodes, devices, threshold, strategy] = GetParam();
  const int world = nodes * devices;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    std::vector<std::vector<float>> node0_results;  // node 0's device 0, per tensor
    std::mutex mutex;
    std::vector<std::vector<std::vector<float>>> every(static_cast<size_t>(world));
    testing::run_nodes(transport, nodes, devices, 0, [&](Context& ctx, NodeDevices& node) {
      EngineOptions options = testing::test_engine_options();
      options.fusion_threshold_bytes = threshold;
      options.local_group = node.group.get();
      options.hierarchy.strategy = strategy;
      options.hierarchy.pipeline_chunk_bytes = 64 << 10;  // several chunks for the big tensor
      Engine engine(ctx, options);
      EXPECT_EQ(engine.local_devices(), devices);
      NodeTensors tensors(devices, ctx.rank() * devices);
      std::vector<size_t> order(tensors.counts.size());
      for (size_t t = 0; t < order.size(); ++t) order[t] = t;
      std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(ctx.rank())));
      std::vector<Handle> handles;
      for (size_t t : order) handles.push_back(engine.submit(tensors.allreduce(t, op)));
      for (Handle& handle : handles) handle.wait();
      std::lock_guard<std::mutex> lock(mutex);
      for (int d = 0; d < devices; ++d) {
        for (size_t t = 0; t < tensors.counts.size(); ++t) {
          every[static_cast<size_t>(ctx.rank() * devices + d)].push_back(tensors.values[t][d]);
        }
      }
    });
    const NodeTensors shape(1, 0);
    for (size_t t = 0; t < shape.counts.size(); ++t) {
      for (size_t i = 0; i < shape.counts[t]; ++i) {
        double want = 0;
        for (int g = 0; g < world; ++g) want += input(g, t, i);
        if (op == ReduceOp::kAvg) want /= world;
        ASSERT_NEAR(every[0][t][i], want, 1e-5 * want) << "tensor " << t << " element " << i;
      }
      for (int g = 1; g < world; ++g) {
        ASSERT_EQ(every[g][t], every[0][t]) << "global rank " << g << " tensor " << t << " op "
                                            << reduce_op_name(op) << " differs from rank 0's";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Inproc, EngineOverDevices,
    ::testing::Combine(::testing::Values(Transport::kInproc), ::testing::Values(1, 2, 3),
                       ::testing::Values(1, 3), ::testing::Values(size_t{0}, size_t{1} << 20),
                       ::testing::Values(Hierarchy::kReduceBcast, Hierarchy::kRsAg)));
INSTANTIATE_TEST_SUITE_P(Tcp, EngineOverDevices,
                         ::testing::Combine(::testing::Values(Transport::kTcp),
                                            ::testing::Values(3), ::testing::Values(2),
                                            ::testing::Values(size_t{1} << 20),
                                            ::testing::Values(Hierarchy::kReduceBcast)));

// fp16 on the wire: within half precision of the exact average, the same bits everywhere.
TEST(EngineOverDevices, Fp16CompressedBucketsStayCloseAndIdentical) {
  constexpr int kNodes = 2, kDevices = 2;
  std::mutex mutex;
  std::vector<std::vector<float>> results;
  testing::run_nodes(Transport::kInproc, kNodes, kDevices, 0, [&](Context& ctx, NodeDevices& node) {
    EngineOptions options = testing::test_engine_options();
    options.fusion_threshold_bytes = 1 << 20;
    options.compression = Compression::kFp16;
    options.local_group = node.group.get();
    Engine engine(ctx, options);
    NodeTensors tensors(kDevices, ctx.rank() * kDevices);
    std::vector<Handle> handles;
    for (size_t t = 0; t < tensors.counts.size(); ++t) {
      handles.push_back(engine.submit(tensors.allreduce(t, ReduceOp::kAvg)));
    }
    for (Handle& handle : handles) handle.wait();
    std::lock_guard<std::mutex> lock(mutex);
    for (int d = 0; d < kDevices; ++d) results.push_back(tensors.values[3][d]);
  });
  for (size_t i = 0; i < results[0].size(); ++i) {
    double want = 0;
    for (int g = 0; g < kNodes * kDevices; ++g) want += input(g, 3, i);
    want /= kNodes * kDevices;
    ASSERT_NEAR(results[0][i], want, 2e-3 * want) << i;
  }
  for (const auto& r : results) EXPECT_EQ(r, results[0]);
}

// On CPU devices an uncompressed bucket is never copied into a fusion buffer: its members are
// parts on their own buffers (the hierarchy joins them into its chunks); fp16 buckets are.
TEST(EngineOverDevices, UncompressedBucketsRunOnTheTensorsOwnBuffers) {
  constexpr int kNodes = 2, kDevices = 2;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ringd_engine_hierarchy_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const Compression compression : {Compression::kNone, Compression::kFp16}) {
    SCOPED_TRACE(compression_name(compression));
    const auto pattern = dir / (std::string(compression_name(compression)) + ".%r.json");
    testing::run_nodes(Transport::kInproc, kNodes, kDevices, 0,
                       [&](Context& ctx, NodeDevices& node) {
                         EngineOptions options = testing::test_engine_options();
                         options.fusion_threshold_bytes = 1 << 20;
                         options.compression = compression;
                         options.timeline_path = pattern.string();
                         options.local_group = node.group.get();
                         Engine engine(ctx, options);
                         NodeTensors tensors(kDevices, ctx.rank() * kDevices);
                         std::vector<Submission> members;
                         for (size_t t = 0; t < tensors.counts.size(); ++t) {
                           members.push_back(tensors.allreduce(t, ReduceOp::kSum));
                         }
                         for (Handle& handle : engine.submit_group("all", std::move(members))) {
                           handle.wait();
                         }
                       });
    for (int rank = 0; rank < kNodes; ++rank) {
      std::string path = pattern.string();
      path.replace(path.find("%r"), 2, std::to_string(rank));
      std::ifstream in(path);
      ASSERT_TRUE(in) << path;
      size_t copies = 0, allreduces = 0;
      for (const auto& event : nlohmann::json::parse(in)) {
        if (!event.contains("name")) continue;
        copies += event["name"] == "memcpy in" || event["name"] == "memcpy out";
        allreduces += event["name"] == "allreduce";
      }
      EXPECT_GT(allreduces, 0u) << "rank " << rank;
      if (compression == Compression::kNone) {
        EXPECT_EQ(copies, 0u) << "rank " << rank;
      } else {
        EXPECT_GT(copies, 0u) << "rank " << rank;
      }
    }
  }
  std::filesystem::remove_all(dir);
}

// A broadcast's root is a device's global rank: device 1 of node 1 here.
TEST(EngineOverDevices, BroadcastsFromAnyDeviceOfAnyNode) {
  constexpr int kNodes = 3, kDevices = 2, kRoot = 1 * kDevices + 1;
  for (size_t threshold : {size_t{0}, size_t{1} << 20}) {
    std::mutex mutex;
    std::vector<std::vector<float>> seen;
    testing::run_nodes(Transport::kInproc, kNodes, kDevices, 0,
                       [&](Context& ctx, NodeDevices& node) {
                         EngineOptions options = testing::test_engine_options();
                         options.fusion_threshold_bytes = threshold;
                         options.local_group = node.group.get();
                         Engine engine(ctx, options);
                         NodeTensors tensors(kDevices, ctx.rank() * kDevices);
                         std::vector<Handle> handles;
                         for (size_t t = 0; t < tensors.counts.size(); ++t) {
                           Submission s = tensors.allreduce(t, ReduceOp::kSum);
                           s.kind = CollectiveKind::kBroadcast;
                           s.root = kRoot;
                           handles.push_back(engine.submit(std::move(s)));
                         }
                         for (Handle& handle : handles) handle.wait();
                         std::lock_guard<std::mutex> lock(mutex);
                         for (int d = 0; d < kDevices; ++d) {
                           for (size_t t = 0; t < tensors.counts.size(); ++t)
                             seen.push_back(tensors.values[t][d]);
                         }
                       });
    const NodeTensors root(1, kRoot);
    for (size_t k = 0; k < seen.size(); ++k) {
      const size_t t = k % root.counts.size();
      EXPECT_EQ(seen[k], root.values[t][0]) << "threshold " << threshold << " entry " << k;
    }
  }
}

// The code `call` threw; kInternal, with a failure recorded, when it threw nothing.
ErrorCode code_of(const std::function<void()>& call, std::string* message = nullptr) {
  try {
    call();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return ErrorCode::kInternal;
}

// What cannot run over devices is refused on the submitting rank, naming the tensor; the engine
// goes on serving the rest.
TEST(EngineOverDevices, RefusesWhatCannotRunOverDevices) {
  testing::run_nodes(Transport::kInproc, 2, 2, 0, [&](Context& ctx, NodeDevices& node) {
    EngineOptions options = testing::test_engine_options();
    options.local_group = node.group.get();
    Engine engine(ctx, options);
    NodeTensors tensors(2, ctx.rank() * 2);
    std::string message;

    Submission one_buffer = tensors.allreduce(1, ReduceOp::kSum);
    one_buffer.other_devices.clear();
    EXPECT_EQ(code_of([&] { engine.submit(one_buffer); }, &message), ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("tensor 'grad.1': 1 device buffer(s) for an engine over 2"),
              std::string::npos)
        << message;

    Submission null_device = tensors.allreduce(1, ReduceOp::kSum);
    null_device.other_devices[0] = nullptr;
    EXPECT_EQ(code_of([&] { engine.submit(null_device); }, &message), ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("null data on device 1"), std::string::npos) << message;

    Submission gather = tensors.allreduce(1, ReduceOp::kSum);
    gather.kind = CollectiveKind::kAllgather;
    EXPECT_EQ(code_of([&] { engine.submit(gather); }, &message), ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("allgather does not run over local devices"), std::string::npos);

    Submission dgc = tensors.allreduce(1, ReduceOp::kSum);
    dgc.compression = Compression::kDgc;
    EXPECT_EQ(code_of([&] { engine.submit(dgc); }, &message), ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("dgc compression does not run over local devices"), std::string::npos);

    Submission far_root = tensors.allreduce(1, ReduceOp::kSum);
    far_root.kind = CollectiveKind::kBroadcast;
    far_root.root = 4;  // 2 nodes x 2 devices: 0..3
    EXPECT_EQ(code_of([&] { engine.submit(far_root); }, &message), ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("(size 4: nodes x local devices)"), std::string::npos) << message;

    engine.submit(tensors.allreduce(1, ReduceOp::kSum)).wait();
    EXPECT_EQ(tensors.values[1][1][0],
              input(0, 1, 0) + input(1, 1, 0) + input(2, 1, 0) + input(3, 1, 0));
  });
}

TEST(EngineOverDevices, AFlatEngineRefusesDeviceBuffers) {
  testing::run_ranks(Transport::kInproc, 1, [&](Context& ctx) {
    Engine engine(ctx, testing::test_engine_options());
    NodeTensors tensors(2, 0);
    EXPECT_EQ(code_of([&] { engine.submit(tensors.allreduce(1, ReduceOp::kSum)); }),
              ErrorCode::kInvalidArgument);
  });
}

TEST(EngineOverDevices, DgcAsTheDefaultIsRefusedWhenTheEngineStarts) {
  testing::run_nodes(Transport::kInproc, 1, 2, 0, [&](Context& ctx, NodeDevices& node) {
    EngineOptions options = testing::test_engine_options();
    options.local_group = node.group.get();
    options.compression = Compression::kDgc;
    std::string message;
    EXPECT_EQ(code_of([&] { Engine engine(ctx, options); }, &message), ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("use --local-devices 1 with dgc"), std::string::npos) << message;
  });
}

// Nodes that drive different numbers of devices fail when their engines start, every one of them
// naming the device counts, instead of producing wrong averages.
TEST(EngineOverDevices, NodesWithDifferentDeviceCountsFailToStart) {
  const testing::RankErrors errors = testing::run_nodes_collect(
      Transport::kInproc, 3, [](int rank) { return rank == 2 ? 3 : 2; }, 0,
      [&](Context& ctx, NodeDevices& node) {
        EngineOptions options = testing::test_engine_options();
        options.local_group = node.group.get();
        Engine engine(ctx, options);
      });
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(errors.errors[rank]) << "node " << rank << " started";
    std::string message;
    EXPECT_EQ(code_of([&] { std::rethrow_exception(errors.errors[rank]); }, &message),
              ErrorCode::kMismatch);
    EXPECT_NE(message.find("local devices"), std::string::npos) << message;
  }
}

// A node that fails in the middle of a run (its context aborted, as a crash's closed connections
// would): every other node's pending handles fail within the timeout with kPeerLost naming it,
// and later submissions throw the same. Nothing hangs.
TEST(EngineOverDevices, ANodeThatFailsMidRunFailsEveryPendingHandleOnTheOthers) {
  const testing::RankErrors errors = testing::run_nodes_collect(
      Transport::kInproc, 3, [](int) { return 2; }, 0,
      [&](Context& ctx, NodeDevices& node) {
        EngineOptions options = testing::test_engine_options();
        options.local_group = node.group.get();
        Engine engine(ctx, options);
        NodeTensors tensors(2, ctx.rank() * 2);
        std::vector<Handle> first;
        for (size_t t = 0; t < tensors.counts.size(); ++t) {
          first.push_back(engine.submit(tensors.allreduce(t, ReduceOp::kSum)));
        }
        for (Handle& handle : first) handle.wait();
        if (ctx.rank() == 2) {
          ctx.abort("node 2 failed (test)");
          return;
        }
        // Each fails: in its handle, or already in submit once this node's engine has seen the
        // failure (node 2 may abort before this node submits).
        std::vector<Handle> second;
        for (size_t t = 0; t < tensors.counts.size(); ++t) {
          try {
            second.push_back(engine.submit(tensors.allreduce(t, ReduceOp::kSum)));
          } catch (const Error& error) {
            EXPECT_EQ(error.code(), ErrorCode::kPeerLost) << error.what();
          }
        }
        for (Handle& handle : second) {
          const Error error = testing::expect_error([&] { handle.wait(); });
          EXPECT_EQ(error.code(), ErrorCode::kPeerLost) << error.what();
          EXPECT_NE(std::string(error.what()).find("rank 2"), std::string::npos) << error.what();
        }
        const Error later =
            testing::expect_error([&] { engine.submit(tensors.allreduce(0, ReduceOp::kSum)); });
        EXPECT_EQ(later.code(), ErrorCode::kPeerLost) << later.what();
      },
      std::chrono::seconds(10));
  if (auto error = errors.first()) std::rethrow_exception(error);  // gtest reports its message
}

}  // namespace
}  // namespace ringd
