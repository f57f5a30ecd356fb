// A PieceCopier (device/double_buffered_staging.h) over host memory, for tests without a GPU. It
// logs every call ("fetch 3 s1", "write 2 s0", "wait fetch s1", "wait write s0") and models an
// asynchronous copy engine:
//   - kLazy: a queued copy runs only when the host waits for it (or for a later copy), in queue
//     order, so a copy that is never waited for has not happened yet. A staging that reads a slot
//     without waiting sees the slot's old bytes, deterministically.
//   - kEager: every copy runs as soon as it is queued.
// Copies touching a slot that the test says the host holds (hold/unhold) are recorded as
// violations. reserve_slots() fills new slots with 0xCD.
#pragma once

#include <algorithm>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "device/double_buffered_staging.h"

namespace ringd::testing {

class FakePieceCopier : public device::PieceCopier {
 public:
  enum class Mode { kLazy, kEager };
  explicit FakePieceCopier(Mode mode = Mode::kLazy) : mode_(mode) {}

  void reserve_slots(size_t bytes) override {
    if (!queue_.empty()) violations.push_back("reserve_slots with copies pending");
    if (bytes <= slot_bytes_) return;
    ++reservations;
    slot_bytes_ = bytes;
    for (auto& slot : slots_) slot.assign(bytes, 0xCD);
  }
  void* slot(int slot) override { return slots_[slot].data(); }

  void start(device::CopyDirection direction, int slot, DeviceBuffers buffers,
             const HostPiece& piece, DataType dtype) override {
    const bool to_host = direction == device::CopyDirection::kToHost;
    log.push_back(std::string(to_host ? "fetch " : "write ") + piece_name(piece) + " s" +
                  std::to_string(slot));
    const size_t bytes = piece.count * dtype_size(dtype);
    largest_copy = std::max(largest_copy, bytes);
    if (bytes > slot_bytes_) violations.push_back("copy larger than the slot: " + log.back());
    char* device = static_cast<char*>(buffers[piece.device].data) + piece.first * dtype_size(dtype);
    queue_.push_back({direction, slot, device, bytes, ++queued_});
    last_[slot][to_host ? 0 : 1] = queued_;
    if (mode_ == Mode::kEager) run_through(queued_);
  }

  void wait(device::CopyDirection direction, int slot) override {
    const bool to_host = direction == device::CopyDirection::kToHost;
    log.push_back(std::string("wait ") + (to_host ? "fetch" : "write") + " s" +
                  std::to_string(slot));
    run_through(last_[slot][to_host ? 0 : 1]);
  }

  // The test's view of which slots the caller holds.
  void hold(int slot) { held_[slot] = true; }
  void unhold(int slot) { held_[slot] = false; }
  // Names pieces in the log: "<index>" when the test registers them, else "d<device>@<first>".
  void name_pieces(const std::vector<HostPiece>& pieces) { named_ = pieces; }

  std::vector<std::string> log;
  std::vector<std::string> violations;
  size_t largest_copy = 0;
  int reservations = 0;

 private:
  struct Copy {
    device::CopyDirection direction;
    int slot;
    char* device;
    size_t bytes;
    size_t sequence;
  };

  void run_through(size_t sequence) {
    while (!queue_.empty() && queue_.front().sequence <= sequence) {
      const Copy copy = queue_.front();
      queue_.pop_front();
      if (held_[copy.slot]) violations.push_back("a copy touched a slot the host holds");
      if (copy.bytes == 0) continue;
      if (copy.direction == device::CopyDirection::kToHost) {
        std::memcpy(slots_[copy.slot].data(), copy.device, copy.bytes);
      } else {
        std::memcpy(copy.device, slots_[copy.slot].data(), copy.bytes);
      }
    }
  }

  std::string piece_name(const HostPiece& piece) const {
    for (size_t i = 0; i < named_.size(); ++i) {
      if (named_[i].device == piece.device && named_[i].first == piece.first &&
          named_[i].count == piece.count) {
        return std::to_string(i);
      }
    }
    return "d" + std::to_string(piece.device) + "@" + std::to_string(piece.first);
  }

  Mode mode_;
  std::vector<unsigned char> slots_[2];
  size_t slot_bytes_ = 0;
  std::deque<Copy> queue_;
  size_t queued_ = 0;
  size_t last_[2][2] = {{0, 0}, {0, 0}};  // [slot][fetch, write]: sequence of the last copy
  bool held_[2] = {false, false};
  std::vector<HostPiece> named_;
};

}  // namespace ringd::testing
