// Which parameter server holds which tensor. Every worker and every server computes the map from
// the same inputs (tensor sizes in registration order, the number of servers, the policy), so
// nobody has to send it: the servers check that every worker describes the same job.
//
//   round-robin      tensor i -> server i mod k          (TensorFlow's default
//   replica_device_setter) greedy-by-size   largest tensor first, each to the server holding the
//   fewest elements so far
//                    (ties: the lowest server index; equal sizes: the lower tensor index first)
//
// Round-robin ignores sizes, so one large tensor (the 784x100 weight of the MLP, VGG's fc6) can
// leave one server with most of the bytes; greedy balances bytes, which is what bounds a server's
// link. Both are pure functions, hence deterministic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringd::ps {

enum class ShardPolicy : uint32_t { kRoundRobin = 0, kGreedyBySize = 1 };

// "round-robin" or "greedy" (also "greedy-by-size"); throws kInvalidArgument naming `flag`.
ShardPolicy parse_shard_policy(const std::string& flag, const std::string& text);
const char* shard_policy_name(ShardPolicy policy);

// server_of[i] for every tensor i (element counts in registration order). Throws kInvalidArgument
// when servers < 1.
std::vector<int> assign_shards(const std::vector<size_t>& counts, int servers, ShardPolicy policy);

// The tensors of `server`, in increasing index order.
std::vector<size_t> tensors_of(const std::vector<int>& server_of, int server);

}  // namespace ringd::ps
