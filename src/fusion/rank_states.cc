#include "fusion/rank_states.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace ringd::fusion {
namespace {

constexpr size_t kNamesListed = 8;  // per rank, in a deadlock message

// The first kNamesListed items, each written by `write`, then "and N more".
template <typename Item, typename Write>
std::string listed(const std::vector<Item>& items, Write write) {
  std::ostringstream os;
  for (size_t i = 0; i < items.size() && i < kNamesListed; ++i) {
    os << (i ? ", " : "");
    write(os, items[i]);
  }
  if (items.size() > kNamesListed) os << " and " << items.size() - kNamesListed << " more";
  return os.str();
}

std::string quoted_list(const std::vector<std::string>& names) {
  return listed(names, [](std::ostream& os, const std::string& name) { os << "'" << name << "'"; });
}

std::string pending_list(const NameCounts& pending) {
  return listed(pending, [](std::ostream& os, const auto& entry) {
    os << "'" << entry.first << "' (its " << ordinal(entry.second + 1) << ")";
  });
}

}  // namespace

std::vector<double> rank_lags(const std::vector<double>& waits) {
  std::vector<double> sorted = waits;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  double median = 0;
  if (n > 0) median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  std::vector<double> lags;
  lags.reserve(n);
  for (double wait : waits) lags.push_back(std::max(0.0, median - wait));
  return lags;
}

std::string describe_straggler(const std::vector<double>& lags, int cycles, double warning_s) {
  if (lags.empty()) return "";
  const size_t worst =
      static_cast<size_t>(std::max_element(lags.begin(), lags.end()) - lags.begin());
  if (lags[worst] < warning_s) return "";
  const auto ms = [](double seconds) { return static_cast<int64_t>(seconds * 1000 + 0.5); };
  std::ostringstream os;
  os << "rank " << worst << " is the straggler: ready " << ms(lags[worst])
     << " ms after the median rank, on average over the last " << cycles
     << " cycles (a slower or throttled CPU, a busy host, a slow link or slow data loading on "
        "that rank; every rank waits for it)";
  bool first = true;
  for (size_t rank = 0; rank < lags.size(); ++rank) {
    if (rank == worst || lags[rank] < warning_s / 2) continue;
    os << (first ? "; also behind: " : ", ") << "rank " << rank << " " << ms(lags[rank]) << " ms";
    first = false;
  }
  return os.str();
}

std::string ordinal(uint64_t n) {
  const uint64_t tens = n % 100;
  const char* suffix = "th";
  if (tens < 11 || tens > 13) {
    switch (n % 10) {
      case 1: suffix = "st"; break;
      case 2: suffix = "nd"; break;
      case 3: suffix = "rd"; break;
      default: break;
    }
  }
  return std::to_string(n) + suffix;
}

std::string find_deadlock(const std::vector<RankState>& states) {
  if (states.size() < 2) return "";
  std::map<std::string, size_t> ranks_pending;  // name -> ranks that have it pending
  for (const RankState& state : states) {
    if (!state.blocked || state.shutting_down) return "";
    for (const auto& [name, count] : state.pending) ++ranks_pending[name];
  }
  for (const auto& [name, ranks] : ranks_pending) {
    if (ranks == states.size()) return "";  // it runs this cycle: progress
  }
  std::ostringstream os;
  os << "deadlock: no rank can make progress. ";
  for (size_t rank = 0; rank < states.size(); ++rank) {
    const RankState& state = states[rank];
    os << (rank ? "; " : "") << "rank " << rank << " waits on " << quoted_list(state.awaited)
       << " (pending there: " << (state.pending.empty() ? "nothing" : pending_list(state.pending))
       << ", " << state.done << " collectives done)";
  }
  os << ". Each rank waits for a tensor that another rank has not submitted and cannot submit "
        "before its own wait returns: collectives called in different orders on different ranks, "
        "a collective skipped under a rank-dependent condition, or uneven data (one rank runs more "
        "steps than another). Submit the same tensors in the same order on every rank (or submit "
        "them all asynchronously, then wait), and give every rank the same number of steps";
  return os.str();
}

namespace {

// "(3 collectives in all; its reason: ...)" or, for a failure, "(3 collectives in all): ...".
void reason_of(std::ostringstream& os, const RankState& state, const char* collectives) {
  const std::string reason = state.reason.empty() ? "not given" : state.reason;
  os << " (" << state.done << collectives;
  if (state.failed) {
    os << "): " << reason;
  } else {
    os << "; its reason: " << reason << ")";
  }
}

}  // namespace

std::string describe_stopped(const std::vector<StoppedRank>& stopped) {
  std::ostringstream os;
  for (size_t i = 0; i < stopped.size(); ++i) {
    const StoppedRank& s = stopped[i];
    os << (i ? "; " : "") << "rank " << s.rank
       << (s.state.failed ? " failed and shut down" : " has shut down");
    reason_of(os, s.state, " collectives completed");
  }
  return os.str();
}

std::string stopped_tensor_message(int rank, const std::string& tensor, uint64_t own_count,
                                   const std::vector<StoppedRank>& stopped) {
  std::ostringstream os;
  os << "rank " << rank << ": tensor '" << tensor << "' (its " << ordinal(own_count + 1)
     << " submission here) cannot complete: ";
  bool all_failed = true;
  for (size_t i = 0; i < stopped.size(); ++i) {
    const StoppedRank& s = stopped[i];
    const auto it = std::find_if(s.state.done_by_name.begin(), s.state.done_by_name.end(),
                                 [&](const auto& entry) { return entry.first == tensor; });
    all_failed = all_failed && s.state.failed;
    os << (i ? "; " : "") << "rank " << s.rank
       << (s.state.failed ? " failed and shut down " : " has shut down ");
    if (it != s.state.done_by_name.end()) {
      os << "after completing it " << it->second << (it->second == 1 ? " time" : " times");
    } else {
      os << "without completing it";
    }
    reason_of(os, s.state, " collectives in all");
  }
  if (!all_failed) {
    os << ". Uneven data across ranks? Every rank must run the same collectives the same number "
          "of times: give every rank the same number of steps (batches), or stop them all at the "
          "same one";
  }
  return os.str();
}

}  // namespace ringd::fusion
