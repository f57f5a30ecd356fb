// The hierarchical collectives (ringd/hierarchy.h) between real processes, run under mpirun with
// 2, 3 and 4 processes (tests/mpi/CMakeLists.txt): every process is one node with L = 1, 3, 4 CPU
// devices, over the mpi transport and over tcp bootstrapped by MPI (mpi_bootstrap_store), both
// strategies, counts 0, 1 and primes (the largest pipelined in chunks). Device d of node r is
// global rank r * L + d; every device's values are checked in closed form (testing/values.h), every
// device of a node is compared bitwise with device 0, and device 0 with every other node's by hash
// (through MPI).
//
// Value checks use EXPECT, not ASSERT, so a wrong value on one node does not leave the other nodes
// waiting in the next collective.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "ringd/hierarchy.h"
#include "ringd/mpi.h"
#include "ringd/tcp.h"
#include "testing/check.h"
#include "testing/local_devices.h"

namespace ringd {
namespace {

using testing::NodeDevices;

constexpr auto kTimeout = std::chrono::seconds(60);

Context& mpi_world() {
  static std::unique_ptr<Context> ctx = [] {
    mpi_ensure_initialized();
    return mpi_connect(MPI_COMM_WORLD, kTimeout);
  }();
  return *ctx;
}

Context& tcp_world() {
  static std::unique_ptr<Context> ctx = [] {
    mpi_ensure_initialized();
    const std::string secret = "ringd-mpi-hierarchical-test";
    // Rank 0 serves the store: it must outlive every rank's connecting, so it lives as long as
    // the process.
    static std::unique_ptr<Store> store = mpi_bootstrap_store(MPI_COMM_WORLD, secret);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    TcpOptions options;
    options.bind_address = "127.0.0.1";  // ctest runs every process on this host
    options.secret = secret;
    options.timeout = kTimeout;
    return tcp_connect(*store, rank, size, options);
  }();
  return *ctx;
}

Context& world(const std::string& transport) {
  return transport == "mpi" ? mpi_world() : tcp_world();
}

uint64_t fnv1a(const void* data, size_t bytes) {
  uint64_t hash = 1469598103934665603ULL;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 1099511628211ULL;
  return hash;
}

// "" when every device of this node holds the same `bytes` as device 0 and device 0's bytes
// hash the same on every node (a collective over MPI: every node must call it).
std::string differences(const NodeDevices& node, size_t bytes) {
  std::string local;
  for (size_t d = 1; d < node.memory.size(); ++d) {
    if (std::memcmp(node.memory[d].data(), node.memory[0].data(), bytes) != 0) {
      local = "device " + std::to_string(d) + " differs from device 0";
    }
  }
  const uint64_t hash = fnv1a(node.memory[0].data(), bytes);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<uint64_t> all(size);
  MPI_Allgather(&hash, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (int r = 1; r < size; ++r) {
    if (all[r] != all[0]) return "node " + std::to_string(r) + " differs from node 0";
  }
  return local;
}

HierarchyOptions options_for(Hierarchy strategy) {
  HierarchyOptions options;
  options.strategy = strategy;
  options.inter_node.segment_bytes = 4000;  // several segments in flight from ~1K elements up
  options.pipeline_chunk_bytes = 64 << 10;  // 65537 elements: several chunks, pipelined
  return options;
}

const std::vector<int> kDevices = {1, 3, 4};
const std::vector<Hierarchy> kStrategies = {Hierarchy::kReduceBcast, Hierarchy::kRsAg};

class MpiHierarchical : public ::testing::TestWithParam<std::string> {};

TEST_P(MpiHierarchical, AllreduceIsExactAndBitwiseEqualOnEveryDevice) {
  Context& ctx = world(GetParam());
  const std::vector<size_t> counts = {0, 1, 2, 13, 61, 1021, 65537};
  for (int devices : kDevices) {
    const int ranks = ctx.size() * devices;
    for (Hierarchy strategy : kStrategies) {
      for (auto [dtype, op] : {std::pair{DataType::kFloat32, ReduceOp::kSum},
                               std::pair{DataType::kFloat64, ReduceOp::kAvg},
                               std::pair{DataType::kInt32, ReduceOp::kMax},
                               std::pair{DataType::kBFloat16, ReduceOp::kSum}}) {
        const size_t elem = dtype_size(dtype);
        const double tolerance = op == ReduceOp::kAvg ? testing::avg_tolerance(dtype) : 0.0;
        NodeDevices node(devices, counts.back() * elem);
        for (size_t count : counts) {
          for (int d = 0; d < devices; ++d) {
            const auto input = testing::make_input(op, node.global_rank(ctx, d), count, dtype);
            std::memcpy(node.memory[d].data(), input.data(), count * elem);
          }
          hierarchical_allreduce(ctx, *node.group, node.buffers, count, dtype, op,
                                 options_for(strategy));
          const std::string where = std::to_string(devices) + " devices, " +
                                    hierarchy_name(strategy) + ", " + dtype_name(dtype) + " " +
                                    reduce_op_name(op) + ", count " + std::to_string(count);
          for (int d = 0; d < devices; ++d) {
            EXPECT_EQ(testing::first_mismatch(
                          node.memory[d].data(), count, dtype, tolerance,
                          [&](size_t i) { return testing::expected_value(op, ranks, i); }),
                      "")
                << "node " << ctx.rank() << " device " << d << ", " << where;
          }
          EXPECT_EQ(differences(node, count * elem), "") << where;
        }
      }
    }
  }
}

// Broadcast and allgather reduce nothing, so the strategy does not apply to them (hierarchy.h).
TEST_P(MpiHierarchical, BroadcastFromFirstMiddleAndLastDevice) {
  Context& ctx = world(GetParam());
  for (int devices : kDevices) {
    const int ranks = ctx.size() * devices;
    for (int root : {0, ranks / 2, ranks - 1}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{4099}}) {
        NodeDevices node(devices, count * 4);
        for (int d = 0; d < devices; ++d) {
          float* buf = reinterpret_cast<float*>(node.memory[d].data());
          for (size_t i = 0; i < count; ++i) {
            buf[i] = node.global_rank(ctx, d) == root ? static_cast<float>(root * 1000 + i % 997)
                                                      : -1.0f;
          }
        }
        hierarchical_broadcast(ctx, *node.group, node.buffers, count, DataType::kFloat32,
                               root / devices, root % devices, options_for(kDefaultHierarchy));
        for (int d = 0; d < devices; ++d) {
          EXPECT_EQ(testing::first_mismatch(node.memory[d].data(), count, DataType::kFloat32, 0,
                                            [&](size_t i) { return root * 1000.0 + i % 997; }),
                    "")
              << "node " << ctx.rank() << " device " << d << ", " << devices << " devices, root "
              << root << ", count " << count;
        }
        EXPECT_EQ(differences(node, count * 4), "") << "root " << root << " count " << count;
      }
    }
  }
}

TEST_P(MpiHierarchical, AllgatherPutsEveryDeviceBlockInGlobalRankOrder) {
  Context& ctx = world(GetParam());
  for (int devices : kDevices) {
    const int ranks = ctx.size() * devices;
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1031}}) {
      NodeDevices node(devices, count * ranks * 4);
      for (int d = 0; d < devices; ++d) {
        const int rank = node.global_rank(ctx, d);
        int32_t* buf = reinterpret_cast<int32_t*>(node.memory[d].data());
        for (size_t i = 0; i < count * ranks; ++i) buf[i] = -7;
        for (size_t i = 0; i < count; ++i)
          buf[rank * count + i] = static_cast<int32_t>(rank * 97 + i);
      }
      hierarchical_allgather(ctx, *node.group, node.buffers, count, DataType::kInt32,
                             options_for(Hierarchy::kReduceBcast));
      for (int d = 0; d < devices; ++d) {
        EXPECT_EQ(testing::first_mismatch(
                      node.memory[d].data(), count * ranks, DataType::kInt32, 0,
                      [&](size_t j) { return static_cast<double>(j / count * 97 + j % count); }),
                  "")
            << "node " << ctx.rank() << " device " << d << ", " << devices << " devices, count "
            << count;
      }
      EXPECT_EQ(differences(node, count * ranks * 4), "") << devices << " devices count " << count;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, MpiHierarchical, ::testing::Values("mpi", "tcp"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace ringd

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ringd::mpi_world();  // both contexts up before any test: connecting is collective
  ringd::tcp_world();
  if (ringd::mpi_world().rank() != 0) {  // one rank prints; every rank's exit code counts
    delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
  }
  return RUN_ALL_TESTS();
}
