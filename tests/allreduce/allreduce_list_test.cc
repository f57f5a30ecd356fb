// allreduce_list: several buffers allreduced as if laid end to end, without copying them together.
// Each rank's result must be bitwise what allreduce() of the joined buffers gives (random floats,
// so a different reduction order would show), on every rank, with buffers of every size (0, 1,
// smaller and larger than a segment, straddling chunk and segment boundaries); the latency-bound
// path (copied into one buffer) and disagreements too.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <tuple>

#include "ringd/collectives.h"
#include "ringd/error.h"
#include "testing/check.h"
#include "testing/ranks.h"

namespace ringd {
namespace {

using testing::Transport;

// Rank r's values: pseudo-random floats in [-1, 1), a different stream per rank.
std::vector<float> random_values(int rank, size_t count) {
  std::mt19937 random(static_cast<unsigned>(1000 + rank));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = uniform(random);
  return values;
}

// Runs allreduce_list over buffers of `counts` and allreduce over the same values joined, and
// compares them on every rank; also checks that every rank ends with the same bytes.
void check_list(Transport transport, int size, const std::vector<size_t>& counts, ReduceOp op,
                const CollectiveOptions& options) {
  size_t total = 0;
  for (size_t c : counts) total += c;
  testing::RankOutputs outputs(size);
  testing::run_ranks(transport, size, [&](Context& ctx) {
    const std::vector<float> values = random_values(ctx.rank(), total);
    std::vector<float> joined = values;
    allreduce(ctx, joined.data(), joined.data(), total, DataType::kFloat32, op, options);

    std::vector<std::vector<float>> pieces;
    size_t offset = 0;
    for (size_t c : counts) {
      pieces.emplace_back(values.begin() + offset, values.begin() + offset + c);
      pieces.back().push_back(123.0f);  // a guard past the end
      offset += c;
    }
    std::vector<BufferView> views;
    for (size_t p = 0; p < counts.size(); ++p) {
      views.push_back({counts[p] ? pieces[p].data() : nullptr, counts[p]});
    }
    allreduce_list(ctx, views, DataType::kFloat32, op, options);
    std::vector<float> listed;
    for (size_t p = 0; p < counts.size(); ++p) {
      EXPECT_EQ(pieces[p][counts[p]], 123.0f) << "written past buffer " << p;
      listed.insert(listed.end(), pieces[p].begin(), pieces[p].begin() + counts[p]);
    }
    ASSERT_EQ(listed.size(), total);
    EXPECT_EQ(std::memcmp(listed.data(), joined.data(), total * sizeof(float)), 0)
        << "rank " << ctx.rank() << ": the list's result differs from the joined buffer's";
    outputs.put(ctx.rank(), listed.data(), total * sizeof(float));
  });
  EXPECT_EQ(outputs.differences(), "");
}

using Param = std::tuple<Transport, int, ReduceOp>;
class AllreduceList : public ::testing::TestWithParam<Param> {};

TEST_P(AllreduceList, RingOverBuffersEqualsTheJoinedBufferBitwise) {
  const auto [transport, size, op] = GetParam();
  CollectiveOptions ring;
  ring.algorithm = AllreduceAlgorithm::kRing;
  ring.segment_bytes = 1000;  // 250 floats: segments straddle most buffer ends
  ring.segments_in_flight = 2;
  check_list(transport, size, {0, 1, 249, 250, 251, 0, 7, 4096, 3, 100000, 0}, op, ring);
  check_list(transport, size, {5, 5}, op, ring);  // fewer elements per chunk than a segment
  // kAuto above the ring's size class takes the ring; below it, the joined copy.
  CollectiveOptions automatic;
  automatic.ring_allreduce_bytes = 64 << 10;
  automatic.ring_threshold_set = true;
  check_list(transport, size, {30000, 1, 20000}, op, automatic);
  check_list(transport, size, {10, 0, 20, 300}, op, automatic);
}

INSTANTIATE_TEST_SUITE_P(
    Inproc, AllreduceList,
    ::testing::Combine(::testing::Values(Transport::kInproc), ::testing::Values(2, 3, 4, 5),
                       ::testing::Values(ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax)));
INSTANTIATE_TEST_SUITE_P(Tcp, AllreduceList,
                         ::testing::Combine(::testing::Values(Transport::kTcp),
                                            ::testing::Values(3),
                                            ::testing::Values(ReduceOp::kAvg)));

TEST(AllreduceListOneRank, LeavesTheBuffersAsTheyAre) {
  testing::run_ranks(Transport::kInproc, 1, [&](Context& ctx) {
    std::vector<float> a{1, 2}, b{3};
    std::vector<BufferView> views{{a.data(), 2}, {b.data(), 1}};
    allreduce_list(ctx, views, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(a, (std::vector<float>{1, 2}));
    EXPECT_EQ(b, (std::vector<float>{3}));
  });
}

// Ranks whose lists add up to different totals fail with kMismatch on every rank (the totals are
// in every message's signature), and a null buffer is refused before anything is sent.
TEST(AllreduceListErrors, DisagreementsAndNullBuffers) {
  const testing::RankErrors errors = testing::run_ranks_collect(
      Transport::kInproc, 3,
      [&](Context& ctx) {
        std::vector<float> a(5000), b(ctx.rank() == 2 ? 3001 : 3000);
        CollectiveOptions ring;
        ring.algorithm = AllreduceAlgorithm::kRing;
        std::vector<BufferView> views{{a.data(), a.size()}, {b.data(), b.size()}};
        allreduce_list(ctx, views, DataType::kFloat32, ReduceOp::kSum, ring);
      },
      std::chrono::seconds(10));
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(errors.errors[rank]) << "rank " << rank << " succeeded";
    try {
      std::rethrow_exception(errors.errors[rank]);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kMismatch) << "rank " << rank << ": " << e.what();
    }
  }
  testing::run_ranks(Transport::kInproc, 2, [&](Context& ctx) {
    std::vector<float> a(4);
    std::vector<BufferView> views{{a.data(), 4}, {nullptr, 3}};
    try {
      allreduce_list(ctx, views, DataType::kFloat32, ReduceOp::kSum);
      ADD_FAILURE() << "a null buffer was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    }
  });
}

}  // namespace
}  // namespace ringd
