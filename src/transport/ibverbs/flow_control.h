// Credit-based flow control for one direction of an ibverbs pair, as two pure counters classes
// (no verbs, no locks: the channel calls them under its mutex; tests call them directly).
//
//   sender (SendCredits)                          receiver (ReceiveSlots)
//   write s -> slot s mod N  ==== RDMA WRITE ===>  on_arrival(s mod N)   slot holds data
//                                                  consume()             copied out, slot free
//   on_credit(k)            <=== credit write ===  credits_due() >= batch -> send k credits
//
// The sender starts with N credits (every slot is free) and may write only while it holds one, so
// the receiver never sees a slot overwritten before it consumed it; a staging slot is reused only
// after the local completion of the write that last read it. The receiver returns credits in
// batches (fewer credit writes) and limits its credit writes in flight to N, which with the N data
// writes and one abort bounds both queues at 2N + 2 work requests (SlotGeometry::queue_depth).
//
// No deadlock: when the sender is stalled, all N slots are at the receiver, arrived or consumed;
// once consumed, N >= batch credits are due and go back.
#pragma once

#include <cstdint>

namespace ringd::ibverbs {

class SendCredits {
 public:
  explicit SendCredits(uint32_t slots);

  uint32_t slots() const { return slots_; }
  // A remote slot is free (a credit is held) and so is the local staging slot.
  bool can_write() const { return written_ < credited_ && written_ - completed_ < slots_; }
  // Takes a credit; returns the slot index for the write. Throws kInternal without a credit.
  uint32_t begin_write();
  // The local completion of a data write. False (a protocol fault) when none was outstanding.
  bool on_write_completed();
  // The receiver freed `count` slots. False when that frees slots that were never written (a
  // corrupt or foreign peer); the counters are unchanged then.
  bool on_credit(uint64_t count);

  uint64_t written() const { return written_; }
  // Slots written and not yet credited back (held by the receiver).
  uint64_t held_by_peer() const { return written_ + slots_ - credited_; }

 private:
  const uint32_t slots_;
  uint64_t written_ = 0;
  uint64_t completed_ = 0;
  uint64_t credited_;  // total slots the sender may have written so far
};

class ReceiveSlots {
 public:
  // Credits go back once `credit_batch` (1..slots) slots are free.
  ReceiveSlots(uint32_t slots, uint32_t credit_batch);

  uint32_t slots() const { return slots_; }
  // A data write landed in `slot`. False when it is not the next slot in ring order, or when the
  // sender wrote more slots than it had credits for (an overrun); the counters are unchanged then.
  bool on_arrival(uint32_t slot);
  bool has_arrived() const { return arrived_ > consumed_; }
  uint32_t next_slot() const { return static_cast<uint32_t>(consumed_ % slots_); }
  // The slot next_slot() was copied out; throws kInternal when none had arrived.
  void consume();

  // How many credits to send now: the consumed-but-unreturned slots once there are at least
  // `credit_batch` of them and fewer than N credit writes are in flight; else 0.
  uint32_t credits_due() const;
  void credits_sent(uint32_t count);  // a credit write carrying `count` was posted
  // A credit write completed locally. False when none was in flight.
  bool on_credit_write_completed();

  uint64_t arrived() const { return arrived_; }
  uint64_t consumed() const { return consumed_; }
  uint32_t credit_writes_in_flight() const { return credit_writes_in_flight_; }

 private:
  const uint32_t slots_;
  const uint32_t credit_batch_;
  uint64_t arrived_ = 0;
  uint64_t consumed_ = 0;
  uint64_t returned_ = 0;
  uint32_t credit_writes_in_flight_ = 0;
};

// The default batch: a quarter of the window, at least 1.
inline uint32_t default_credit_batch(uint32_t slots) { return slots >= 8 ? slots / 4 : 1; }

}  // namespace ringd::ibverbs
