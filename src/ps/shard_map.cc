#include "ps/shard_map.h"

#include <algorithm>
#include <numeric>

#include "ringd/error.h"

namespace ringd::ps {

ShardPolicy parse_shard_policy(const std::string& flag, const std::string& text) {
  if (text == "round-robin") return ShardPolicy::kRoundRobin;
  if (text == "greedy" || text == "greedy-by-size") return ShardPolicy::kGreedyBySize;
  RINGD_THROW(kInvalidArgument,
              flag << ": unknown sharding '" << text << "' (use round-robin or greedy)");
}

const char* shard_policy_name(ShardPolicy policy) {
  return policy == ShardPolicy::kRoundRobin ? "round-robin" : "greedy";
}

std::vector<int> assign_shards(const std::vector<size_t>& counts, int servers, ShardPolicy policy) {
  RINGD_CHECK_ARG(servers >= 1, "parameter server: need at least one server, got " << servers);
  std::vector<int> server_of(counts.size(), 0);
  if (policy == ShardPolicy::kRoundRobin) {
    for (size_t i = 0; i < counts.size(); ++i) server_of[i] = static_cast<int>(i % servers);
    return server_of;
  }
  std::vector<size_t> order(counts.size());
  std::iota(order.begin(), order.end(), 0);
  // stable_sort keeps equal sizes in index order, so the result is the same everywhere.
  std::stable_sort(order.begin(), order.end(),
                   [&counts](size_t a, size_t b) { return counts[a] > counts[b]; });
  std::vector<size_t> load(static_cast<size_t>(servers), 0);
  for (size_t tensor : order) {
    const size_t lightest =
        static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    server_of[tensor] = static_cast<int>(lightest);
    load[lightest] += counts[tensor];
  }
  return server_of;
}

std::vector<size_t> tensors_of(const std::vector<int>& server_of, int server) {
  std::vector<size_t> owned;
  for (size_t i = 0; i < server_of.size(); ++i) {
    if (server_of[i] == server) owned.push_back(i);
  }
  return owned;
}

}  // namespace ringd::ps
