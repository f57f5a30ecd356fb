#include "fusion/response_cache.h"

#include "ringd/error.h"

namespace ringd::fusion {

ResponseCache::Lookup ResponseCache::lookup(const std::string& name, const TensorParams& mine,
                                            int rank, int* slot) const {
  const auto it = slot_of_.find(name);
  if (it == slot_of_.end()) return Lookup::kMiss;
  *slot = it->second;
  return response_matches(entries_[it->second].response, mine, rank) ? Lookup::kHit
                                                                     : Lookup::kInvalid;
}

bool ResponseCache::occupied(int slot) const {
  return slot >= 0 && static_cast<size_t>(slot) < entries_.size() && entries_[slot].used;
}

const Response& ResponseCache::response(int slot) const {
  if (!occupied(slot)) RINGD_THROW(kInternal, "response cache slot " << slot << " is empty");
  return entries_[slot].response;
}

int ResponseCache::slot_of(const std::string& name) const {
  const auto it = slot_of_.find(name);
  return it == slot_of_.end() ? -1 : it->second;
}

void ResponseCache::touch(int slot) {
  if (occupied(slot)) entries_[slot].last_use = ++clock_;
}

void ResponseCache::erase(int slot) {
  if (!occupied(slot)) return;
  slot_of_.erase(entries_[slot].response.name);
  entries_[slot] = Entry{};
}

std::string ResponseCache::put(const Response& response) {
  if (capacity_ == 0) return "";
  std::string evicted;
  int slot = slot_of(response.name);
  if (slot < 0) {
    // The lowest free slot, a new one, or the least recently used entry's.
    for (size_t i = 0; i < entries_.size() && slot < 0; ++i) {
      if (!entries_[i].used) slot = static_cast<int>(i);
    }
    if (slot < 0 && entries_.size() < capacity_) {
      entries_.emplace_back();
      slot = static_cast<int>(entries_.size()) - 1;
    }
    if (slot < 0) {
      slot = 0;
      for (size_t i = 1; i < entries_.size(); ++i) {
        if (entries_[i].last_use < entries_[slot].last_use) slot = static_cast<int>(i);
      }
      evicted = entries_[slot].response.name;
      erase(slot);
    }
  }
  Entry& entry = entries_[slot];
  entry.used = true;
  entry.response = response;
  entry.last_use = ++clock_;
  slot_of_[response.name] = slot;
  return evicted;
}

}  // namespace ringd::fusion
