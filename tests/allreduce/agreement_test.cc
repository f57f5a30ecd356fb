// Collective agreement (issue 15, item 8): ranks that disagree on the dtype (of the same byte
// size), the op, the algorithm or the broadcast root used to exit 0 with a wrong result (and an
// allgatherv's counts must agree too). The
// collective's signature travels in every message tag, so each such disagreement fails with
// kMismatch on every rank, naming the field, over inproc and tcp, at the first message.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/collective_signature.h"
#include "ringd/collectives.h"
#include "ringd/error.h"
#include "testing/ranks.h"

namespace ringd {
namespace {

using namespace std::chrono_literals;
using testing::Transport;

struct Case {
  const char* name;
  const char* field;  // what every rank's message must name
  // The collective rank `rank` calls: rank 1 disagrees with the others.
  std::function<void(Context&)> call;
};

void run_allreduce(Context& ctx, DataType dtype, ReduceOp op, AllreduceAlgorithm algorithm) {
  std::vector<uint8_t> buffer(4096, 0);  // 1024 elements of 4 bytes
  CollectiveOptions options;
  options.algorithm = algorithm;
  allreduce(ctx, buffer.data(), buffer.data(), 1024, dtype, op, options);
}

std::vector<Case> cases() {
  const auto pick = [](Context& ctx, auto same, auto other) {
    return ctx.rank() == 1 ? other : same;
  };
  return {
      {"dtype of the same size", "the dtype (",
       [=](Context& ctx) {
         run_allreduce(ctx, pick(ctx, DataType::kFloat32, DataType::kInt32), ReduceOp::kSum,
                       AllreduceAlgorithm::kRing);
       }},
      {"op", "the op (",
       [=](Context& ctx) {
         run_allreduce(ctx, DataType::kFloat32, pick(ctx, ReduceOp::kSum, ReduceOp::kMax),
                       AllreduceAlgorithm::kRecursiveDoubling);
       }},
      {"algorithm", "the algorithm (",
       [=](Context& ctx) {
         run_allreduce(ctx, DataType::kFloat32, ReduceOp::kSum,
                       pick(ctx, AllreduceAlgorithm::kHalvingDoubling,
                            AllreduceAlgorithm::kRecursiveDoubling));
       }},
      {"collective", "the collective (",
       [=](Context& ctx) {
         std::vector<float> buffer(1024 * 4, 1.0f);
         if (ctx.rank() == 1) {
           reduce_scatter(ctx, buffer.data(), buffer.data(), 1024, DataType::kFloat32,
                          ReduceOp::kSum);
         } else {
           allgather(ctx, buffer.data(), buffer.data(), 1024, DataType::kFloat32);
         }
       }},
      {"allgatherv counts of the same total", "element count",
       [=](Context& ctx) {
         // Rank 1 believes rank 0 sends 200 and rank 1 100; the others the reverse. Same total,
         // so only the counts' hash in the tag can tell.
         const std::vector<size_t> counts = pick(ctx, std::vector<size_t>{100, 200, 300, 400},
                                                 std::vector<size_t>{200, 100, 300, 400});
         std::vector<float> out(1000, 0.0f);
         std::vector<float> in(counts[ctx.rank()], 1.0f);
         allgatherv(ctx, in.data(), out.data(), counts, DataType::kFloat32);
       }},
      {"broadcast root", "root",
       [=](Context& ctx) {
         std::vector<float> buffer(1024, 1.0f);
         broadcast(ctx, buffer.data(), 1024, DataType::kFloat32, pick(ctx, 0, 2));
       }},
  };
}

class Agreement : public ::testing::TestWithParam<Transport> {};

TEST_P(Agreement, EveryDisagreementFailsEveryRankWithMismatchNamingTheField) {
  constexpr int kSize = 4;
  for (const Case& c : cases()) {
    const auto result = testing::run_ranks_collect(GetParam(), kSize, c.call, 5000ms);
    int mismatches = 0;
    const bool broadcast = std::string(c.name) == "broadcast root";
    for (int rank = 0; rank < kSize; ++rank) {
      // Rank 0, the root in the others' eyes, only sends: it cannot see the disagreement, and its
      // own buffer is right (a later collective fails there: its peers aborted the context).
      if (broadcast && rank == 0 && result.errors[rank] == nullptr) continue;
      ASSERT_NE(result.errors[rank], nullptr) << c.name << ": rank " << rank << " succeeded";
      try {
        std::rethrow_exception(result.errors[rank]);
      } catch (const Error& error) {
        const std::string text = error.what();
        // A broadcast's root decides who sends: ranks may also time out waiting, but whoever
        // got a message from the wrong side names the mismatch.
        if (broadcast && error.code() != ErrorCode::kMismatch) {
          continue;
        }
        EXPECT_EQ(error.code(), ErrorCode::kMismatch)
            << c.name << ", rank " << rank << ": " << text;
        EXPECT_NE(text.find(c.field), std::string::npos)
            << c.name << ", rank " << rank << ": " << text;
        ++mismatches;
      }
    }
    EXPECT_GE(mismatches, broadcast ? 1 : kSize) << c.name;
  }
}

TEST_P(Agreement, RanksThatAgreeAreUnaffected) {
  testing::run_ranks(GetParam(), 4, [](Context& ctx) {
    std::vector<int32_t> values(1000, ctx.rank() + 1);
    allreduce(ctx, values.data(), values.data(), values.size(), DataType::kInt32, ReduceOp::kMax);
    EXPECT_EQ(values[999], 4);
  });
}

INSTANTIATE_TEST_SUITE_P(All, Agreement, ::testing::Values(Transport::kInproc, Transport::kTcp),
                         [](const auto& info) { return testing::transport_name(info.param); });

TEST(CollectiveSignature, EncodesAndNamesEachField) {
  const CollectiveSignature base{
      SignatureKind::kAllreduce, DataType::kFloat32, ReduceOp::kSum, 1, 1024, 0};
  const uint16_t mine = encode_signature(base);
  EXPECT_NE(mine, 0);
  EXPECT_EQ(describe_signature(mine).rfind("allreduce float sum ring, count/root hash ", 0), 0u)
      << describe_signature(mine);
  EXPECT_EQ(signature_difference(mine, mine), "");
  CollectiveSignature other = base;
  other.dtype = DataType::kInt32;
  EXPECT_EQ(signature_difference(mine, encode_signature(other)),
            "dtype (float here, int32 at the peer)");
  other = base;
  other.op = ReduceOp::kMax;
  other.algorithm = 2;
  EXPECT_EQ(signature_difference(mine, encode_signature(other)),
            "op (sum here, max at the peer), algorithm (ring here, rd at the peer)");
  other = base;
  other.kind = SignatureKind::kBroadcast;
  EXPECT_EQ(signature_difference(mine, encode_signature(other)),
            "collective (allreduce here, broadcast at the peer)");
  // Broadcast and allgather do not reduce: their op does not count.
  CollectiveSignature gather{
      SignatureKind::kAllgather, DataType::kFloat32, ReduceOp::kSum, 1, 8, 0};
  CollectiveSignature gather_max = gather;
  gather_max.op = ReduceOp::kMax;
  EXPECT_EQ(encode_signature(gather), encode_signature(gather_max));
  // Counts that differ mostly differ in the hash (31 in 32), and it is said when it is the only
  // difference.
  int differing = 0;
  for (size_t count = 1; count <= 64; ++count) {
    CollectiveSignature next = base;
    next.count = base.count + count;
    differing += encode_signature(next) != mine;
  }
  EXPECT_GE(differing, 56);
  CollectiveSignature root = {
      SignatureKind::kBroadcast, DataType::kFloat32, ReduceOp::kSum, 0, 1024, 0};
  for (int r = 1; r < 8; ++r) {
    CollectiveSignature moved = root;
    moved.root = r;
    const std::string difference =
        signature_difference(encode_signature(root), encode_signature(moved));
    if (!difference.empty()) {
      EXPECT_EQ(difference.rfind("element count or root", 0), 0u) << difference;
    }
  }
  EXPECT_EQ(describe_signature(0), "no collective");
}

}  // namespace
}  // namespace ringd
