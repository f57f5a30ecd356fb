// The response cache: the coordinator's answers for tensors that ran before, kept identically on
// every rank so a tensor submitted again with the same parameters is announced by one byte in
// the cycle's flag vector (its slot) instead of a request to the coordinator.
//
// Every rank applies the same put/touch/erase calls in the same order (they follow from the
// cycle's agreed results), so slots and LRU order never diverge between ranks. Slots are reused
// after an erase; slots() only grows (up to capacity) so the flag vector keeps its layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "fusion/tensor_params.h"

namespace ringd::fusion {

class ResponseCache {
 public:
  explicit ResponseCache(size_t capacity) : capacity_(capacity) {}

  size_t capacity() const { return capacity_; }
  size_t slots() const { return entries_.size(); }

  enum class Lookup {
    kMiss,     // no entry under this name
    kHit,      // the cached answer fits this rank's submission
    kInvalid,  // an entry under this name answers different parameters: it must go
  };
  // `slot` receives the entry's slot for kHit and kInvalid.
  Lookup lookup(const std::string& name, const TensorParams& mine, int rank, int* slot) const;

  bool occupied(int slot) const;
  const Response& response(int slot) const;
  int slot_of(const std::string& name) const;  // -1 if absent

  void touch(int slot);  // the entry ran: it becomes the most recently used
  void erase(int slot);
  // Adds `response` (an existing entry of the same name is replaced in place). When every slot is
  // taken, the least recently used entry is evicted first and its name returned ("" otherwise).
  // Returns "" without inserting when the capacity is 0.
  std::string put(const Response& response);

 private:
  struct Entry {
    bool used = false;
    Response response;
    uint64_t last_use = 0;
  };

  size_t capacity_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, int> slot_of_;
  uint64_t clock_ = 0;
};

}  // namespace ringd::fusion
