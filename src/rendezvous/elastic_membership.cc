#include "rendezvous/elastic_membership.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include "common/sha256.h"
#include "common/text.h"
#include "net/socket.h"
#include "ringd/error.h"

namespace ringd::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Every key of the job's elastic membership.
std::string job_prefix(const std::string& job_id) { return "ringd/elastic/" + job_id; }

std::string record(const ElasticMember& member) {
  return member.id + " " + std::to_string(member.step) + " " + member.who;
}

ElasticMember parse_record(const std::string& text, const std::string& key) {
  ElasticMember member;
  const size_t first = text.find(' ');
  const size_t second = first == std::string::npos ? first : text.find(' ', first + 1);
  bool ok = first != std::string::npos && first > 0;
  if (ok) {
    member.id = text.substr(0, first);
    const std::string step = text.substr(
        first + 1, second == std::string::npos ? std::string::npos : second - first - 1);
    std::istringstream in(step);
    ok = static_cast<bool>(in >> member.step) && in.eof();
    member.who = second == std::string::npos ? "" : text.substr(second + 1);
  }
  if (!ok) {
    RINGD_THROW(kProtocol, "elastic rendezvous: the store's '" << key << "' holds '" << text
                                                               << "', not a member record — is "
                                                                  "another program using this "
                                                                  "store?");
  }
  return member;
}

std::string describe(const std::vector<ElasticMember>& members) {
  std::string text;
  for (const ElasticMember& m : members) {
    if (!text.empty()) text += ", ";
    text += m.who.empty() ? m.id : m.who;
  }
  return text.empty() ? "none" : text;
}

}  // namespace

std::string new_member_id() { return net::random_hex(8); }

std::string generation_key_prefix(const std::string& job_id, int64_t generation) {
  return job_prefix(job_id) + "/g/" + std::to_string(generation);
}

std::string generation_job_id(const std::string& job_id, int64_t generation) {
  const std::string text = "ringd elastic " + job_id + " generation " + std::to_string(generation);
  const Sha256Digest digest = sha256(text.data(), text.size());
  return hex(digest.data(), 16);
}

ElasticMembership::ElasticMembership(Store& store, std::string job_id, ElasticBounds bounds)
    : store_(store), job_id_(std::move(job_id)), bounds_(bounds) {
  RINGD_CHECK_ARG(!job_id_.empty() && job_id_.find_first_of(" /\n") == std::string::npos,
                  "elastic job id '" << job_id_ << "' is empty or holds a space, slash or newline");
  RINGD_CHECK_ARG(bounds_.min_ranks >= 1 && bounds_.max_ranks >= bounds_.min_ranks,
                  "elastic bounds: --min-ranks " << bounds_.min_ranks << " and --max-ranks "
                                                 << bounds_.max_ranks << " (need 1 <= min <= max)");
}

std::string ElasticMembership::job_key(const std::string& name) const {
  return job_prefix(job_id_) + "/" + name;
}

std::string ElasticMembership::key(int64_t generation, const std::string& name) const {
  return generation_key_prefix(job_id_, generation) + "/" + name;
}

std::optional<std::string> ElasticMembership::peek(const std::string& key) {
  try {
    return to_string(store_.get(key, milliseconds(0)));
  } catch (const Error& error) {
    if (error.code() != ErrorCode::kTimeout) throw;
    return std::nullopt;
  }
}

bool ElasticMembership::has(const std::string& key) { return peek(key).has_value(); }

std::string ElasticMembership::ended(int64_t generation) {
  return peek(key(generation, "ended")).value_or("");
}

std::string ElasticMembership::end(int64_t generation, const std::string& reason) {
  std::vector<uint8_t> existing;
  if (store_.add(key(generation, "ended"), to_bytes(reason.empty() ? "ended" : reason),
                 &existing)) {
    return reason;
  }
  return to_string(existing);
}

void ElasticMembership::finish(int64_t generation, const std::string& reason) {
  store_.add(job_key("finished"),
             to_bytes("generation " + std::to_string(generation) + ": " + reason), nullptr);
  end(generation, reason);
}

void ElasticMembership::check_not_finished() {
  if (const std::optional<std::string> how = peek(job_key("finished"))) {
    RINGD_THROW(kUnavailable, "elastic job " << job_id_ << " has finished training (" << *how
                                             << "): there is nothing to join");
  }
}

bool ElasticMembership::newcomer_waiting(int64_t generation) {
  return has(key(generation + 1, "slot/0"));
}

// Closes `generation` with slots 0..claimed-1 (unless another claimant closed it first) and
// returns the list every claimant reads.
std::vector<ElasticMember> ElasticMembership::close(int64_t generation, int claimed) {
  std::vector<ElasticMember> slots;  // in slot order
  for (int i = 0; i < claimed; ++i) {
    const std::string slot_key = key(generation, "slot/" + std::to_string(i));
    slots.push_back(parse_record(to_string(store_.get(slot_key, bounds_.timeout)), slot_key));
  }
  // Rank 0 holds the newest state; then slot order.
  std::stable_sort(slots.begin(), slots.end(),
                   [](const ElasticMember& a, const ElasticMember& b) { return a.step > b.step; });
  std::string list;
  for (const ElasticMember& member : slots) list += record(member) + "\n";
  store_.add(key(generation, "members"), to_bytes(list), nullptr);
  return members_of(generation);
}

std::vector<ElasticMember> ElasticMembership::members_of(int64_t generation) {
  const std::string members_key = key(generation, "members");
  const std::string text = to_string(store_.get(members_key, bounds_.timeout));
  std::vector<ElasticMember> members;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) members.push_back(parse_record(line, members_key));
  }
  return members;
}

Generation ElasticMembership::join(const ElasticMember& self, int64_t from) {
  RINGD_CHECK_ARG(!self.id.empty() && self.id.find_first_of(" \n") == std::string::npos &&
                      self.who.find('\n') == std::string::npos,
                  "elastic member id '" << self.id << "' or name '" << self.who
                                        << "' holds a space or newline");
  const Clock::time_point deadline = Clock::now() + bounds_.timeout;
  const auto left = [&] {
    return std::max(milliseconds(0),
                    std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
  };
  for (int64_t g = std::max<int64_t>(from, 0);; ++g) {
    check_not_finished();
    // A generation that ended or closed takes no one: try the next.
    if (has(key(g, "ended")) || has(key(g, "members"))) continue;
    int slot = 0;
    std::vector<uint8_t> existing;
    while (!store_.add(key(g, "slot/" + std::to_string(slot)), to_bytes(record(self)), &existing)) {
      ++slot;
    }
    int claimed = slot + 1;  // slots 0..claimed-1 are known to exist
    std::vector<ElasticMember> members;
    for (;;) {
      if (has(key(g, "members"))) {
        members = members_of(g);
        break;
      }
      if (claimed >= bounds_.max_ranks) {
        members = close(g, claimed);
        break;
      }
      try {
        store_.get(key(g, "slot/" + std::to_string(claimed)), std::min(bounds_.settle, left()));
        ++claimed;
        continue;
      } catch (const Error& error) {
        if (error.code() != ErrorCode::kTimeout) throw;
      }
      // No one else came for `settle`. The generation before runs still: wait for it to end
      // (its ranks end it at their next step boundary once they see this claim).
      const bool previous_runs = g > 0 && has(key(g - 1, "members")) && !has(key(g - 1, "ended"));
      if (!previous_runs) check_not_finished();
      if (!previous_runs && claimed >= bounds_.min_ranks) {
        members = close(g, claimed);
        break;
      }
      if (left().count() == 0) {
        std::vector<ElasticMember> came;
        for (int i = 0; i < claimed; ++i) {
          const std::string slot_key = key(g, "slot/" + std::to_string(i));
          came.push_back(parse_record(to_string(store_.get(slot_key, milliseconds(0))), slot_key));
        }
        if (previous_runs) {
          RINGD_THROW(kTimeout, "elastic job " << job_id_ << ": generation " << g << " waited "
                                               << bounds_.timeout.count() << " ms for generation "
                                               << g - 1
                                               << " to end (its ranks end it at a step boundary "
                                                  "when a process waits to join; are they "
                                                  "stuck?); waiting: "
                                               << describe(came));
        }
        RINGD_THROW(kTimeout, "elastic job " << job_id_ << ": generation " << g << " has "
                                             << claimed << " of --min-ranks " << bounds_.min_ranks
                                             << " after " << bounds_.timeout.count()
                                             << " ms: " << describe(came));
      }
    }
    for (size_t r = 0; r < members.size(); ++r) {
      if (members[r].id == self.id) {
        Generation generation;
        generation.number = g;
        generation.rank = static_cast<int>(r);
        generation.members = std::move(members);
        return generation;
      }
    }
    // Claimed after the close: the next generation (the running one ends to take us in).
  }
}

}  // namespace ringd::rendezvous
