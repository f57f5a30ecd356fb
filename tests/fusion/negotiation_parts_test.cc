// The engine's parts on their own: protobuf messages round-trip and reject garbage, the response
// cache keeps slots and LRU order, the coordinator explains mismatches, buckets follow the rules.
#include <gtest/gtest.h>

#include "fusion/coordinator.h"
#include "fusion/fusion_plan.h"
#include "fusion/negotiation_codec.h"
#include "fusion/response_cache.h"
#include "ringd/error.h"

namespace ringd::fusion {
namespace {

TensorParams allreduce_params(std::vector<int64_t> shape, DataType dtype = DataType::kFloat32) {
  TensorParams params;
  params.dtype = dtype;
  params.shape = std::move(shape);
  return params;
}

Response response_for(const std::string& name, const TensorParams& params) {
  Response response;
  response.name = name;
  response.params = params;
  return response;
}

TEST(NegotiationCodec, RequestsAndResponsesRoundTrip) {
  TensorParams params = allreduce_params({3, 4}, DataType::kBFloat16);
  params.op = ReduceOp::kAvg;
  params.compression = Compression::kBf16;
  params.group = "g";
  params.group_size = 2;
  const std::vector<Request> requests = {{"a", params, 1234}, {"b", allreduce_params({}), 0}};
  const std::vector<Request> decoded = decode_requests(encode_requests(2, requests), 2);
  ASSERT_EQ(decoded.size(), 2u);
  EXPECT_EQ(decoded[0].name, "a");
  EXPECT_EQ(decoded[0].params, params);
  EXPECT_EQ(decoded[0].waited_us, 1234u);
  EXPECT_EQ(decoded[1].params, allreduce_params({}));

  ResponseList list;
  TensorParams gather = allreduce_params({2, 5});
  gather.kind = CollectiveKind::kAllgather;
  list.responses.push_back(response_for("g", gather));
  list.responses.back().first_dims = {2, 7, 0};
  list.responses.push_back(response_for("bad", params));
  list.responses.back().error = "ranks disagree";
  list.shutdown = true;
  list.shutdown_reason = "stalled";
  const ResponseList back = decode_responses(encode_responses(list), 3);
  ASSERT_EQ(back.responses.size(), 2u);
  EXPECT_EQ(back.responses[0].first_dims, (std::vector<int64_t>{2, 7, 0}));
  EXPECT_EQ(back.responses[1].error, "ranks disagree");
  EXPECT_TRUE(back.shutdown);
  EXPECT_EQ(back.shutdown_reason, "stalled");
}

TEST(NegotiationCodec, GarbageAndForeignValuesAreProtocolErrors) {
  try {
    decode_requests(std::string("\xff\xff\xff\xff garbage", 12), 1);
    FAIL() << "garbage decoded";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kProtocol);
  }
  // Rank 1's list claiming to be rank 2's.
  EXPECT_THROW(decode_requests(encode_requests(2, {}), 1), Error);
  // A dtype this version does not know.
  TensorParams params = allreduce_params({1});
  params.dtype = static_cast<DataType>(99);
  try {
    decode_requests(encode_requests(1, {{"x", params, 0}}), 1);
    FAIL() << "unknown dtype decoded";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kProtocol);
    EXPECT_NE(std::string(error.what()).find("'x'"), std::string::npos) << error.what();
  }
  // An allgather answer that does not list every rank.
  ResponseList list;
  TensorParams gather = allreduce_params({2});
  gather.kind = CollectiveKind::kAllgather;
  list.responses.push_back(response_for("g", gather));
  list.responses.back().first_dims = {2};
  EXPECT_THROW(decode_responses(encode_responses(list), 3), Error);
}

TEST(ResponseCache, HitInvalidMissAndLeastRecentlyUsedEviction) {
  ResponseCache cache(2);
  int slot = -1;
  EXPECT_EQ(cache.lookup("a", allreduce_params({4}), 0, &slot), ResponseCache::Lookup::kMiss);
  EXPECT_EQ(cache.put(response_for("a", allreduce_params({4}))), "");
  EXPECT_EQ(cache.put(response_for("b", allreduce_params({5}))), "");
  EXPECT_EQ(cache.slots(), 2u);
  EXPECT_EQ(cache.lookup("a", allreduce_params({4}), 0, &slot), ResponseCache::Lookup::kHit);
  EXPECT_EQ(slot, 0);
  EXPECT_EQ(cache.lookup("a", allreduce_params({6}), 0, &slot), ResponseCache::Lookup::kInvalid);
  cache.touch(0);  // "a" ran: "b" is now the least recently used
  EXPECT_EQ(cache.put(response_for("c", allreduce_params({1}))), "b");
  EXPECT_EQ(cache.slot_of("c"), 1);
  EXPECT_EQ(cache.slot_of("b"), -1);
  cache.erase(0);
  EXPECT_EQ(cache.put(response_for("d", allreduce_params({1}))), "");
  EXPECT_EQ(cache.slot_of("d"), 0);  // the freed slot is reused; slots() never shrinks
  EXPECT_EQ(cache.slots(), 2u);
  ResponseCache none(0);
  EXPECT_EQ(none.put(response_for("a", allreduce_params({4}))), "");
  EXPECT_EQ(none.slots(), 0u);
}

TEST(ResponseCache, AllgatherHitsCompareOnlyThisRanksRows) {
  ResponseCache cache(4);
  TensorParams gather = allreduce_params({3, 2});
  gather.kind = CollectiveKind::kAllgather;
  Response response = response_for("g", gather);
  response.first_dims = {3, 5};
  cache.put(response);
  int slot = -1;
  TensorParams rank1 = gather;
  rank1.shape = {5, 2};
  EXPECT_EQ(cache.lookup("g", rank1, 1, &slot), ResponseCache::Lookup::kHit);
  EXPECT_EQ(cache.lookup("g", rank1, 0, &slot), ResponseCache::Lookup::kInvalid);
}

TEST(Coordinator, AnswersWhenEveryRankAskedAndExplainsMismatches) {
  Coordinator coordinator(3);
  const auto now = Clock::now();
  coordinator.add(0, {"w", allreduce_params({4, 5}), 0}, now);
  coordinator.add(2, {"w", allreduce_params({4, 6}), 2'000'000}, now);
  coordinator.add(0, {"ok", allreduce_params({1}), 0}, now);
  EXPECT_TRUE(coordinator.take_ready().empty());
  const auto stalled = coordinator.waiting_longer_than(now, std::chrono::seconds(1));
  ASSERT_EQ(stalled.size(), 1u);  // "w" was submitted 2 s ago on rank 2
  EXPECT_EQ(stalled[0].name, "w");
  EXPECT_EQ(stalled[0].submitted_by, (std::vector<int>{0, 2}));
  EXPECT_EQ(stalled[0].missing_on, (std::vector<int>{1}));

  coordinator.add(1, {"w", allreduce_params({4, 5}), 0}, now);
  std::vector<Response> ready = coordinator.take_ready();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_FALSE(ready[0].ok());
  EXPECT_EQ(ready[0].error,
            "tensor 'w' was submitted differently on different ranks: ranks 0, 1 submitted "
            "allreduce float sum [4, 5]; rank 2 submitted allreduce float sum [4, 6]. Every rank "
            "must submit a name with the same collective, dtype, shape (allgather: all but the "
            "first dimension), op, root, compression and group");
  EXPECT_EQ(coordinator.waiting(), 1u);
}

TEST(Coordinator, AllgatherRowsMayDifferPerRank) {
  Coordinator coordinator(2);
  TensorParams gather = allreduce_params({3, 2});
  gather.kind = CollectiveKind::kAllgather;
  coordinator.add(0, {"g", gather, 0}, Clock::now());
  gather.shape = {1, 2};
  coordinator.add(1, {"g", gather, 0}, Clock::now());
  const std::vector<Response> ready = coordinator.take_ready();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_TRUE(ready[0].ok()) << ready[0].error;
  EXPECT_EQ(ready[0].first_dims, (std::vector<int64_t>{3, 1}));
}

TEST(FusionPlan, BucketsByKeyUpToTheThreshold) {
  std::vector<float> memory(1024);
  const auto ready_tensor = [&](const std::string& name, TensorParams params) {
    ReadyTensor ready;
    ready.tensor.name = name;
    ready.tensor.params = params;
    ready.tensor.tensor = Tensor{memory.data(), params.dtype, params.shape};
    return ready;
  };
  TensorParams max = allreduce_params({100});
  max.op = ReduceOp::kMax;
  TensorParams bcast = allreduce_params({10}, DataType::kInt32);
  bcast.kind = CollectiveKind::kBroadcast;
  TensorParams gather = allreduce_params({10});
  gather.kind = CollectiveKind::kAllgather;
  std::vector<ReadyTensor> ready;
  ready.push_back(ready_tensor("a", allreduce_params({100})));  // 400 bytes
  ready.push_back(ready_tensor("b", max));
  ready.push_back(ready_tensor("c", allreduce_params({100})));
  ready.push_back(ready_tensor("d", allreduce_params({100})));  // overflows a+c at 1000 bytes
  ready.push_back(ready_tensor("e", bcast));
  ready.push_back(ready_tensor("f", bcast));
  ready.push_back(ready_tensor("g", gather));
  ready.push_back(ready_tensor("h", gather));
  const auto members_of = [&](size_t threshold, size_t max_tensor) {
    std::vector<std::vector<size_t>> members;
    for (const Bucket& bucket : plan_buckets(ready, threshold, max_tensor)) {
      members.push_back(bucket.members);
    }
    return members;
  };
  EXPECT_EQ(members_of(1000, 0),
            (std::vector<std::vector<size_t>>{{0, 2}, {1}, {3}, {4, 5}, {6}, {7}}));
  EXPECT_EQ(members_of(0, 0).size(), ready.size());
  // Tensors above 100 bytes run alone: only the two 40-byte broadcasts still fuse.
  EXPECT_EQ(members_of(1000, 100),
            (std::vector<std::vector<size_t>>{{0}, {1}, {2}, {3}, {4, 5}, {6}, {7}}));
  // The flat engine's uncompressed allreduces copy nothing (allreduce_list): the limit leaves
  // them alone (the 400-byte ones fuse as without a limit).
  std::vector<std::vector<size_t>> copy_free;
  for (const Bucket& bucket : plan_buckets(ready, 1000, 100, /*copy_free_allreduces=*/true)) {
    copy_free.push_back(bucket.members);
  }
  EXPECT_EQ(copy_free, members_of(1000, 0));
}

}  // namespace
}  // namespace ringd::fusion
