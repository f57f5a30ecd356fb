#include "fusion/coordinator.h"

#include <algorithm>
#include <sstream>

#include "ringd/error.h"

namespace ringd::fusion {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  return os.str();
}

}  // namespace

std::string mismatch_message(const std::string& name,
                             const std::vector<std::optional<TensorParams>>& by_rank) {
  // Ranks grouped by what they submitted, in order of the group's first rank.
  std::vector<std::pair<TensorParams, std::vector<int>>> variants;
  for (size_t rank = 0; rank < by_rank.size(); ++rank) {
    if (!by_rank[rank]) continue;
    auto it = std::find_if(variants.begin(), variants.end(),
                           [&](const auto& variant) { return variant.first == *by_rank[rank]; });
    if (it == variants.end()) {
      variants.push_back({*by_rank[rank], {static_cast<int>(rank)}});
    } else {
      it->second.push_back(static_cast<int>(rank));
    }
  }
  std::ostringstream os;
  os << "tensor '" << name << "' was submitted differently on different ranks: ";
  for (size_t i = 0; i < variants.size(); ++i) {
    os << (i ? "; " : "") << rank_list(variants[i].second) << " submitted "
       << describe(variants[i].first);
  }
  os << ". Every rank must submit a name with the same collective, dtype, shape (allgather: all "
        "but the first dimension), op, root, compression and group";
  return os.str();
}

void Coordinator::add(int rank, const Request& request, Clock::time_point now) {
  auto [it, inserted] = table_.try_emplace(request.name);
  Entry& entry = it->second;
  const auto submitted = now - std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::microseconds(request.waited_us));
  if (inserted) {
    entry.by_rank.resize(size_);
    entry.first_seen = submitted;
  }
  entry.first_seen = std::min(entry.first_seen, submitted);
  if (entry.by_rank[rank]) {
    RINGD_THROW(kInternal,
                "rank " << rank << " requested tensor '" << request.name << "' twice in one round");
  }
  entry.by_rank[rank] = request.params;
  if (++entry.count < size_) return;
  ready_.push_back(complete(request.name, entry));
  table_.erase(it);
}

Response Coordinator::complete(const std::string& name, const Entry& entry) const {
  Response response;
  response.name = name;
  response.params = *entry.by_rank[0];
  for (int rank = 1; rank < size_; ++rank) {
    if (!params_agree(response.params, *entry.by_rank[rank])) {
      response.error = mismatch_message(name, entry.by_rank);
      return response;
    }
  }
  if (response.params.kind == CollectiveKind::kAllgather) {
    for (const auto& params : entry.by_rank) response.first_dims.push_back(params->shape[0]);
  }
  return response;
}

std::vector<Response> Coordinator::take_ready() {
  std::vector<Response> ready;
  ready.swap(ready_);
  return ready;
}

std::vector<StalledTensor> Coordinator::waiting_longer_than(
    Clock::time_point now, std::chrono::duration<double> age) const {
  std::vector<StalledTensor> stalled;
  for (const auto& [name, entry] : table_) {
    const std::chrono::duration<double> waited = now - entry.first_seen;
    if (waited < age) continue;
    StalledTensor tensor;
    tensor.name = name;
    tensor.waited_s = waited.count();
    for (int rank = 0; rank < size_; ++rank) {
      (entry.by_rank[rank] ? tensor.submitted_by : tensor.missing_on).push_back(rank);
    }
    stalled.push_back(std::move(tensor));
  }
  std::sort(stalled.begin(), stalled.end(),
            [](const auto& a, const auto& b) { return a.waited_s > b.waited_s; });
  return stalled;
}

}  // namespace ringd::fusion
