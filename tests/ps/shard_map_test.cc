// Sharding policies: hand-worked maps for round-robin and greedy-by-size, the greedy tie rules,
// balance against round-robin on a skewed model, more servers than tensors, bad input.
#include "ps/shard_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "ringd/error.h"

namespace ringd::ps {
namespace {

std::vector<size_t> loads(const std::vector<size_t>& counts, const std::vector<int>& server_of,
                          int servers) {
  std::vector<size_t> load(static_cast<size_t>(servers), 0);
  for (size_t i = 0; i < counts.size(); ++i) load[static_cast<size_t>(server_of[i])] += counts[i];
  return load;
}

TEST(ShardMap, RoundRobinCyclesThroughServers) {
  const std::vector<size_t> counts = {78400, 100, 1000, 10, 5, 5, 7};
  EXPECT_EQ(assign_shards(counts, 3, ShardPolicy::kRoundRobin),
            (std::vector<int>{0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(assign_shards(counts, 1, ShardPolicy::kRoundRobin), std::vector<int>(7, 0));
}

TEST(ShardMap, GreedyPlacesLargestFirstOnLightestServer) {
  // Largest first: 78400 -> s0; 1000 -> s1; 100 -> s2; 10 -> s2 (100 < 1000); then 7 -> s2
  // (load 110), 5 (index 4) -> s2 (117), 5 (index 5) -> s2 (122): s2 stays the lightest.
  const std::vector<size_t> counts = {78400, 100, 1000, 10, 5, 5, 7};
  EXPECT_EQ(assign_shards(counts, 3, ShardPolicy::kGreedyBySize),
            (std::vector<int>{0, 2, 1, 2, 2, 2, 2}));
}

TEST(ShardMap, GreedyTiesGoToLowestServerAndLowerTensorFirst) {
  // Four equal tensors on two servers: 0 -> s0, 1 -> s1, 2 -> s0, 3 -> s1.
  EXPECT_EQ(assign_shards({8, 8, 8, 8}, 2, ShardPolicy::kGreedyBySize),
            (std::vector<int>{0, 1, 0, 1}));
}

TEST(ShardMap, GreedyBalancesASkewedModelBetterThanRoundRobin) {
  // The MLP 784-100-10: weight, bias, weight, bias.
  const std::vector<size_t> mlp = {78400, 100, 1000, 10};
  const auto rr = loads(mlp, assign_shards(mlp, 2, ShardPolicy::kRoundRobin), 2);
  const auto greedy = loads(mlp, assign_shards(mlp, 2, ShardPolicy::kGreedyBySize), 2);
  EXPECT_EQ(rr, (std::vector<size_t>{79400, 110}));
  EXPECT_EQ(greedy, (std::vector<size_t>{78400, 1110}));
  // Many similar tensors: greedy's heaviest server is within one tensor of the mean.
  std::vector<size_t> counts;
  for (size_t i = 0; i < 50; ++i) counts.push_back(1000 + (i * 7919) % 5000);
  for (int servers : {2, 3, 5, 8}) {
    const auto load =
        loads(counts, assign_shards(counts, servers, ShardPolicy::kGreedyBySize), servers);
    const size_t total = std::accumulate(load.begin(), load.end(), size_t{0});
    const size_t biggest = *std::max_element(counts.begin(), counts.end());
    EXPECT_LE(*std::max_element(load.begin(), load.end()), total / servers + biggest)
        << servers << " servers";
  }
}

TEST(ShardMap, MoreServersThanTensorsLeavesSomeEmpty) {
  for (ShardPolicy policy : {ShardPolicy::kRoundRobin, ShardPolicy::kGreedyBySize}) {
    const std::vector<int> server_of = assign_shards({3, 2}, 4, policy);
    EXPECT_EQ(server_of, (std::vector<int>{0, 1})) << shard_policy_name(policy);
    EXPECT_TRUE(tensors_of(server_of, 3).empty());
    EXPECT_EQ(tensors_of(server_of, 1), std::vector<size_t>{1});
  }
  EXPECT_TRUE(assign_shards({}, 2, ShardPolicy::kGreedyBySize).empty());
}

TEST(ShardMap, RejectsBadInput) {
  try {
    assign_shards({1}, 0, ShardPolicy::kRoundRobin);
    FAIL() << "zero servers accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(parse_shard_policy("--ps-sharding", "greedy"), ShardPolicy::kGreedyBySize);
  EXPECT_EQ(parse_shard_policy("--ps-sharding", "round-robin"), ShardPolicy::kRoundRobin);
  try {
    parse_shard_policy("--ps-sharding", "random");
    FAIL() << "unknown policy accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("--ps-sharding"), std::string::npos);
  }
}

}  // namespace
}  // namespace ringd::ps
