#include "transport/ibverbs/flow_control.h"

#include "ringd/error.h"

namespace ringd::ibverbs {

SendCredits::SendCredits(uint32_t slots) : slots_(slots), credited_(slots) {
  RINGD_CHECK_ARG(slots >= 1, "an ibverbs credit window needs at least one slot");
}

uint32_t SendCredits::begin_write() {
  if (!can_write()) {
    RINGD_THROW(kInternal, "ibverbs: write without a credit (written "
                               << written_ << ", credited " << credited_ << ", completed "
                               << completed_ << ")");
  }
  return static_cast<uint32_t>(written_++ % slots_);
}

bool SendCredits::on_write_completed() {
  if (completed_ >= written_) return false;
  ++completed_;
  return true;
}

bool SendCredits::on_credit(uint64_t count) {
  // The receiver can only free slots it was sent: credited may reach written + N, never more.
  if (count == 0 || count > written_ + slots_ - credited_) return false;
  credited_ += count;
  return true;
}

ReceiveSlots::ReceiveSlots(uint32_t slots, uint32_t credit_batch)
    : slots_(slots), credit_batch_(credit_batch) {
  RINGD_CHECK_ARG(slots >= 1 && credit_batch >= 1 && credit_batch <= slots,
                  "ibverbs: credit batch " << credit_batch << " must be 1.." << slots);
}

bool ReceiveSlots::on_arrival(uint32_t slot) {
  if (slot != arrived_ % slots_) return false;       // out of ring order
  if (arrived_ - returned_ >= slots_) return false;  // no credit was ever given for it
  ++arrived_;
  return true;
}

void ReceiveSlots::consume() {
  if (!has_arrived()) RINGD_THROW(kInternal, "ibverbs: consumed a slot that has not arrived");
  ++consumed_;
}

uint32_t ReceiveSlots::credits_due() const {
  const uint64_t free = consumed_ - returned_;
  if (free < credit_batch_ || credit_writes_in_flight_ >= slots_) return 0;
  return static_cast<uint32_t>(free);
}

void ReceiveSlots::credits_sent(uint32_t count) {
  if (count == 0 || returned_ + count > consumed_) {
    RINGD_THROW(kInternal, "ibverbs: returned " << count << " credits with only "
                                                << consumed_ - returned_ << " slots free");
  }
  returned_ += count;
  ++credit_writes_in_flight_;
}

bool ReceiveSlots::on_credit_write_completed() {
  if (credit_writes_in_flight_ == 0) return false;
  --credit_writes_in_flight_;
  return true;
}

}  // namespace ringd::ibverbs
