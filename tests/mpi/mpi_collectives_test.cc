// The collectives over the mpi transport, in real processes: run under mpirun (see
// tests/mpi/CMakeLists.txt). Every dtype x op x counts x algorithm x in/out-of-place, expected
// values from testing/values.h, and all ranks' results compared bitwise (by hash, via MPI).
#include <gtest/gtest.h>

#include <cstring>

#include "ringd/collectives.h"
#include "ringd/mpi.h"
#include "testing/check.h"

namespace ringd {
namespace {

Context& world() {
  static std::unique_ptr<Context> ctx = [] {
    mpi_ensure_initialized();
    return mpi_connect(MPI_COMM_WORLD, std::chrono::seconds(60));
  }();
  return *ctx;
}

uint64_t fnv1a(const void* data, size_t bytes) {
  uint64_t hash = 1469598103934665603ULL;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 1099511628211ULL;
  return hash;
}

// True when every rank passed the same hash.
bool same_on_all_ranks(uint64_t hash) {
  std::vector<uint64_t> all(world().size());
  MPI_Allgather(&hash, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (uint64_t h : all) {
    if (h != all[0]) return false;
  }
  return true;
}

TEST(MpiCollectives, AllreduceEveryDtypeOpCountAlgorithm) {
  Context& ctx = world();
  const int size = ctx.size();
  for (DataType dtype : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (!reduce_op_supported(dtype, op)) continue;
      for (auto algorithm : {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRecursiveDoubling,
                             AllreduceAlgorithm::kHalvingDoubling}) {
        for (bool in_place : {false, true}) {
          for (size_t count :
               {size_t{0}, size_t{1}, size_t{2}, size_t{13}, size_t{1021}, size_t{20011}}) {
            CollectiveOptions options;
            options.algorithm = algorithm;
            options.segment_bytes = 1000;
            std::vector<unsigned char> in = testing::make_input(op, ctx.rank(), count, dtype);
            std::vector<unsigned char> out(in.size(), 0xAB);
            void* result = in_place ? in.data() : out.data();
            allreduce(ctx, in.data(), result, count, dtype, op, options);
            const double tolerance = op == ReduceOp::kAvg ? testing::avg_tolerance(dtype) : 0.0;
            const std::string bad = testing::first_mismatch(
                result, count, dtype, tolerance,
                [&](size_t i) { return testing::expected_value(op, size, i); });
            ASSERT_EQ(bad, "") << "rank " << ctx.rank() << " " << dtype_name(dtype) << " "
                               << reduce_op_name(op) << " " << allreduce_algorithm_name(algorithm)
                               << " count " << count << (in_place ? " in place" : "");
            ASSERT_TRUE(same_on_all_ranks(fnv1a(result, count * dtype_size(dtype))))
                << dtype_name(dtype) << " " << reduce_op_name(op) << " count " << count;
          }
        }
      }
    }
  }
}

TEST(MpiCollectives, LargeAllreduceBroadcastAllgatherReduceScatter) {
  Context& ctx = world();
  const int size = ctx.size();
  const size_t count = (64u << 20) / 4 + 5;  // 64 MiB of floats plus an uneven tail
  std::vector<unsigned char> in =
      testing::make_input(ReduceOp::kSum, ctx.rank(), count, DataType::kFloat32);
  allreduce(ctx, in.data(), in.data(), count, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_EQ(testing::first_mismatch(
                in.data(), count, DataType::kFloat32, 0,
                [&](size_t i) { return testing::expected_value(ReduceOp::kSum, size, i); }),
            "");
  ASSERT_TRUE(same_on_all_ranks(fnv1a(in.data(), count * 4)));

  for (int root = 0; root < size; ++root) {
    std::vector<float> buf(100003, -1.0f);
    if (ctx.rank() == root) {
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(root * 7 + i % 1000);
    }
    broadcast(ctx, buf.data(), buf.size(), DataType::kFloat32, root);
    ASSERT_EQ(testing::first_mismatch(buf.data(), buf.size(), DataType::kFloat32, 0,
                                      [&](size_t i) { return root * 7.0 + i % 1000; }),
              "")
        << "root " << root;
  }

  const size_t per_rank = 30011;
  std::vector<int32_t> mine(per_rank), gathered(per_rank * size);
  for (size_t i = 0; i < per_rank; ++i) mine[i] = static_cast<int32_t>(ctx.rank() * 100000 + i);
  allgather(ctx, mine.data(), gathered.data(), per_rank, DataType::kInt32);
  for (size_t j = 0; j < gathered.size(); ++j) {
    ASSERT_EQ(gathered[j], static_cast<int32_t>(j / per_rank * 100000 + j % per_rank)) << j;
  }

  std::vector<unsigned char> full =
      testing::make_input(ReduceOp::kMax, ctx.rank(), per_rank * size, DataType::kFloat64);
  std::vector<double> part(per_rank);
  reduce_scatter(ctx, full.data(), part.data(), per_rank, DataType::kFloat64, ReduceOp::kMax);
  ASSERT_EQ(testing::first_mismatch(part.data(), per_rank, DataType::kFloat64, 0,
                                    [&](size_t i) {
                                      return testing::expected_value(ReduceOp::kMax, size,
                                                                     ctx.rank() * per_rank + i);
                                    }),
            "");
}

}  // namespace
}  // namespace ringd

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ringd::world();  // MPI up before any test; finalized at exit by mpi_ensure_initialized
  if (ringd::world().rank() != 0) {  // one rank prints; every rank's exit code counts
    delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
  }
  return RUN_ALL_TESTS();
}
