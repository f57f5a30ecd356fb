// Who is in an elastic job now (issue 39): the job's processes form generation after generation
// through the rendezvous store, each generation a fixed set of ranks with a transport of its own.
// When a rank is lost the survivors end their generation and form the next one among themselves;
// a process that arrives while a generation runs waits in the next one, and the running ranks end
// theirs at a step boundary to take it in (the job grows back).
//
// Keys (every one written once, with add(): the TCP store never replaces a "ringd/" key), under
// "ringd/elastic/<job id>/g/<G>/":
//
//   slot/<i>   "<member id> <step> <who>": the i-th process to claim a place in generation G (the
//              first free i); <step> is the newest step whose state the process holds (-1: none,
//              a newcomer), <who> names it in messages ("pid 4711 on host-a")
//   members    the generation's members in rank order, one slot record per line: written once by
//              whichever claimant closes the generation (the first add wins, every claimant reads
//              the same list). Rank 0 is a process that holds the newest step (then the lowest
//              slot): the one the others take their state from.
//   (and "ringd/elastic/<job id>/finished": the job is done; a process arriving later is told so)
//   ended      why the generation ended ("rank 2 (pid 81 on node-2) lost at step 51", "a process
//              waits to join"): the first reason stays. No process claims a slot in an ended or a
//              closed generation.
//
// A generation closes when max_ranks have claimed a slot, or when at least min_ranks have and no
// one else claimed for `settle`; never while the generation before it still runs (so a newcomer
// waits for the running ranks to end theirs instead of starting a job alone). A claimant that is
// not in the closed list (it claimed after the close) goes on to the next generation. Fewer than
// min_ranks for `timeout`: kTimeout naming the generation, how many came and who.
//
// The generation's transport carries the generation in its job id (generation_job_id), so a rank
// of an older generation can never connect to a newer one.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ringd/store.h"

namespace ringd::rendezvous {

struct ElasticBounds {
  int min_ranks = 1;
  int max_ranks = 1;
  // How long a generation waits for one more claimant once it has min_ranks.
  std::chrono::milliseconds settle{500};
  // How long join() waits for min_ranks (and for a running generation to end).
  std::chrono::milliseconds timeout{60000};
};

struct ElasticMember {
  std::string id;     // unique per process (random): new_member_id()
  int64_t step = -1;  // the newest step whose state this process holds; -1: none
  std::string who;    // "pid 4711 on host-a": for messages; no spaces needed, no newline allowed
};

struct Generation {
  int64_t number = 0;
  int rank = 0;                        // this process's rank in it
  std::vector<ElasticMember> members;  // in rank order
  int size() const { return static_cast<int>(members.size()); }
};

// 16 random hex digits.
std::string new_member_id();

// Where generation `generation`'s keys live: "ringd/elastic/<job id>/g/<G>" (its transport's under
// "<that>/tcp").
std::string generation_key_prefix(const std::string& job_id, int64_t generation);

// A generation's transport job id (32 hex digits): the job's id and the generation, hashed; the
// same on every member, another for every other generation or job.
std::string generation_job_id(const std::string& job_id, int64_t generation);

class ElasticMembership {
 public:
  // `job_id`: the job's identity (job/topology.h's JobIdentity: every process of the job must
  // name the same one). Throws kInvalidArgument for bounds that cannot form a generation.
  ElasticMembership(Store& store, std::string job_id, ElasticBounds bounds);

  // Joins the first generation at or after `from` that is still open, waits for it to close and
  // returns it. Throws kTimeout (see above).
  Generation join(const ElasticMember& self, int64_t from);

  // Ends `generation` for `reason` (the first reason recorded stays; returns it).
  std::string end(int64_t generation, const std::string& reason);

  // Ends `generation` and the job: every later join() throws kUnavailable ("has finished
  // training: there is nothing to join") instead of starting a job of its own from nothing.
  void finish(int64_t generation, const std::string& reason);

  // Why `generation` ended, or "" while it runs (does not wait).
  std::string ended(int64_t generation);

  // Whether a process has claimed a place in the generation after `generation` (does not wait):
  // the running generation then ends at its next step boundary to take it in.
  bool newcomer_waiting(int64_t generation);

  const ElasticBounds& bounds() const { return bounds_; }

 private:
  std::string job_key(const std::string& name) const;
  std::string key(int64_t generation, const std::string& name) const;
  void check_not_finished();
  std::optional<std::string> peek(const std::string& key);  // the value, if the key exists now
  bool has(const std::string& key);
  std::vector<ElasticMember> close(int64_t generation, int claimed);
  std::vector<ElasticMember> members_of(int64_t generation);

  Store& store_;
  std::string job_id_;
  ElasticBounds bounds_;
};

}  // namespace ringd::rendezvous
