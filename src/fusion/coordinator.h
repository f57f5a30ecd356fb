// Rank 0's table of requested tensors: who asked for which name with which parameters, since
// when. A tensor leaves the table when every rank has asked for it, as a Response: the agreed
// parameters, or an error naming the ranks that disagree and what each submitted.
//
//   name        rank 0        rank 1        rank 2        first seen
//   "fc.w"      [1000, 512]   [1000, 512]   -             t0   <- waits on rank 2
//   "fc.b"      [1000]        [1000]        [1000]        t1   -> Response, leaves the table
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fusion/negotiation_codec.h"
#include "ringd/engine.h"

namespace ringd::fusion {

using Clock = std::chrono::steady_clock;

class Coordinator {
 public:
  explicit Coordinator(int size) : size_(size) {}

  // Records `rank`'s request. When it is the last rank's, the response joins the ready list.
  void add(int rank, const Request& request, Clock::time_point now);
  // Responses completed since the last call, in the order they completed.
  std::vector<Response> take_ready();

  // Tensors requested by some ranks that have waited at least `age`, oldest first.
  std::vector<StalledTensor> waiting_longer_than(Clock::time_point now,
                                                 std::chrono::duration<double> age) const;
  size_t waiting() const { return table_.size(); }
  // Forgets every waiting request (a deadlock failed them on every rank).
  void clear() { table_.clear(); }

 private:
  struct Entry {
    std::vector<std::optional<TensorParams>> by_rank;
    int count = 0;
    Clock::time_point first_seen;
  };
  Response complete(const std::string& name, const Entry& entry) const;

  int size_;
  std::map<std::string, Entry> table_;
  std::vector<Response> ready_;
};

// The kMismatch text for a tensor whose ranks disagree ("tensor 'w': ranks 0, 1 submitted
// allreduce float sum [4, 5]; rank 2 submitted allreduce float sum [4, 6]; ...").
std::string mismatch_message(const std::string& name,
                             const std::vector<std::optional<TensorParams>>& by_rank);

}  // namespace ringd::fusion
