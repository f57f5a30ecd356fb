// Credit/slot bookkeeping of the ibverbs transport (flow_control.h): the sender never writes
// without a credit, the receiver detects an overrun, credits go back in batches with a bounded
// number in flight, and a randomized sender/receiver pair never overruns and never deadlocks.
#include <gtest/gtest.h>

#include "ringd/config.h"

#if RINGD_HAVE_IBVERBS

#include <deque>
#include <random>

#include "ringd/error.h"
#include "transport/ibverbs/flow_control.h"
#include "transport/ibverbs/slot_format.h"

namespace ringd::ibverbs {
namespace {

TEST(IbverbsSendCredits, WritesStopAtTheWindowAndResumeWithCredits) {
  SendCredits credits(4);
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(credits.can_write());
    EXPECT_EQ(credits.begin_write(), i);
  }
  EXPECT_FALSE(credits.can_write());
  EXPECT_EQ(credits.held_by_peer(), 4u);
  EXPECT_THROW(credits.begin_write(), Error);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(credits.on_write_completed());
  EXPECT_FALSE(credits.can_write());  // staging is free, but the peer still holds every slot
  EXPECT_TRUE(credits.on_credit(2));
  EXPECT_EQ(credits.begin_write(), 0u);  // ring order wraps
  EXPECT_EQ(credits.begin_write(), 1u);
  EXPECT_FALSE(credits.can_write());
}

TEST(IbverbsSendCredits, StagingSlotIsReusedOnlyAfterItsWriteCompleted) {
  SendCredits credits(2);
  credits.begin_write();
  credits.begin_write();
  EXPECT_TRUE(credits.on_credit(2));  // the receiver was fast; our completions are late
  EXPECT_FALSE(credits.can_write());
  EXPECT_TRUE(credits.on_write_completed());
  EXPECT_TRUE(credits.can_write());
  EXPECT_EQ(credits.begin_write(), 0u);
  EXPECT_FALSE(credits.can_write());
}

TEST(IbverbsSendCredits, CreditsForUnwrittenSlotsAreRejected) {
  SendCredits credits(4);
  EXPECT_FALSE(credits.on_credit(1));  // nothing written: nothing to free
  credits.begin_write();
  EXPECT_FALSE(credits.on_credit(2));
  EXPECT_FALSE(credits.on_credit(0));
  EXPECT_TRUE(credits.on_credit(1));
  EXPECT_TRUE(credits.on_write_completed());
  EXPECT_FALSE(credits.on_write_completed());  // only one write was posted
}

TEST(IbverbsReceiveSlots, ArrivalsMustFollowRingOrderAndCredits) {
  ReceiveSlots slots(4, 2);
  EXPECT_FALSE(slots.on_arrival(1));  // slot 0 is next
  for (uint32_t i = 0; i < 4; ++i) EXPECT_TRUE(slots.on_arrival(i));
  EXPECT_FALSE(slots.on_arrival(0));  // a fifth write before any credit went back: overrun
  EXPECT_EQ(slots.next_slot(), 0u);
  slots.consume();
  EXPECT_EQ(slots.credits_due(), 0u);  // below the batch
  slots.consume();
  EXPECT_EQ(slots.credits_due(), 2u);
  slots.credits_sent(2);
  EXPECT_TRUE(slots.on_arrival(0));
  EXPECT_TRUE(slots.on_arrival(1));
  EXPECT_FALSE(slots.on_arrival(2));  // still two unconsumed from the first round
}

TEST(IbverbsReceiveSlots, ConsumingWhatDidNotArriveIsABug) {
  ReceiveSlots slots(2, 1);
  EXPECT_THROW(slots.consume(), Error);
  EXPECT_THROW(slots.credits_sent(1), Error);
  EXPECT_FALSE(slots.on_credit_write_completed());
}

TEST(IbverbsReceiveSlots, CreditWritesInFlightAreBounded) {
  ReceiveSlots slots(2, 1);
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(slots.on_arrival(slots.next_slot()));
    slots.consume();
    ASSERT_EQ(slots.credits_due(), 1u);
    slots.credits_sent(1);
  }
  ASSERT_TRUE(slots.on_arrival(0));
  slots.consume();
  EXPECT_EQ(slots.credits_due(), 0u);  // two credit writes in flight = the window
  EXPECT_TRUE(slots.on_credit_write_completed());
  EXPECT_EQ(slots.credits_due(), 1u);
}

TEST(IbverbsFlowControl, DefaultBatchAndQueueDepth) {
  EXPECT_EQ(default_credit_batch(1), 1u);
  EXPECT_EQ(default_credit_batch(4), 1u);
  EXPECT_EQ(default_credit_batch(16), 4u);
  SlotGeometry geometry{16, 65536};
  EXPECT_EQ(geometry.queue_depth(), 34u);
  EXPECT_EQ(geometry.payload_bytes(), 65536u - kSlotHeaderBytes);
  EXPECT_EQ(geometry.chunks(0), 1u);
  EXPECT_EQ(geometry.chunks(geometry.payload_bytes()), 1u);
  EXPECT_EQ(geometry.chunks(geometry.payload_bytes() + 1), 2u);
  EXPECT_EQ(geometry.stage_offset(0), geometry.ring_bytes());
  EXPECT_EQ(geometry.receive_offset(geometry.abort_slot()), 16u * 65536);
}

TEST(IbverbsFlowControl, ImmediateEncodingRoundTrips) {
  for (ImmKind kind : {ImmKind::kData, ImmKind::kCredit, ImmKind::kAbort}) {
    for (uint32_t value : {0u, 1u, 1023u, kImmValueMask}) {
      const uint32_t imm = make_imm(kind, value);
      EXPECT_EQ(imm_kind(imm), kind);
      EXPECT_EQ(imm_value(imm), value);
    }
  }
}

// A sender and a receiver joined by two in-order "wires" (data, credits) with random delivery,
// consumption and completion order. The receiver's checks fail the test on any overrun; the loop
// must deliver every message (no deadlock) with a bounded number of credit writes in flight.
TEST(IbverbsFlowControl, RandomScheduleNeverOverrunsOrDeadlocks) {
  for (uint32_t window : {1u, 2u, 3u, 8u, 16u}) {
    std::mt19937 random(window * 7919);
    SendCredits sender(window);
    ReceiveSlots receiver(window, default_credit_batch(window));
    std::deque<uint32_t> data_wire, credit_wire;
    uint64_t pending_completions = 0, pending_credit_completions = 0;
    uint64_t sent = 0, consumed = 0;
    constexpr uint64_t kMessages = 5000;
    uint64_t steps = 0;
    while (consumed < kMessages) {
      ASSERT_LT(++steps, 1000000u) << "no progress: deadlock (window " << window << ")";
      switch (random() % 6) {
        case 0:
          if (sent < kMessages && sender.can_write()) {
            data_wire.push_back(sender.begin_write());
            ++pending_completions;
            ++sent;
          }
          break;
        case 1:
          if (!data_wire.empty()) {
            ASSERT_TRUE(receiver.on_arrival(data_wire.front())) << "overrun, window " << window;
            data_wire.pop_front();
          }
          break;
        case 2:
          if (receiver.has_arrived()) {
            receiver.consume();
            ++consumed;
          }
          break;
        case 3:
          if (const uint32_t due = receiver.credits_due(); due > 0) {
            receiver.credits_sent(due);
            credit_wire.push_back(due);
            ++pending_credit_completions;
          }
          break;
        case 4:
          if (!credit_wire.empty()) {
            ASSERT_TRUE(sender.on_credit(credit_wire.front()));
            credit_wire.pop_front();
          }
          break;
        case 5:
          if (pending_completions > 0 && random() % 2) {
            ASSERT_TRUE(sender.on_write_completed());
            --pending_completions;
          } else if (pending_credit_completions > 0) {
            ASSERT_TRUE(receiver.on_credit_write_completed());
            --pending_credit_completions;
          }
          break;
      }
      ASSERT_LE(receiver.credit_writes_in_flight(), window);
      ASSERT_LE(sender.held_by_peer(), window);
    }
  }
}

}  // namespace
}  // namespace ringd::ibverbs

#else  // !RINGD_HAVE_IBVERBS

TEST(IbverbsFlowControl, NotBuilt) {
  GTEST_SKIP() << "built without rdma-core (RINGD_HAVE_IBVERBS=0)";
}

#endif
