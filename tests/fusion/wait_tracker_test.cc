// The deadlock detector's view of one rank (src/fusion/wait_tracker.h): when is it blocked?
#include "fusion/wait_tracker.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace ringd::fusion {
namespace {

using Clock = WaitTracker::Clock;

// Runs `body` on a new thread and waits for it (each call is a distinct thread).
template <typename Body>
void on_other_thread(Body body) {
  std::thread thread(body);
  thread.join();
}

TEST(WaitTracker, NobodyWaitingIsNotBlocked) {
  auto tracker = std::make_shared<WaitTracker>(0);
  tracker->note_submitter();
  EXPECT_FALSE(tracker->snapshot().blocked);
}

TEST(WaitTracker, TheOnlySubmitterWaitingIsBlockedAndNamesTheTensor) {
  auto tracker = std::make_shared<WaitTracker>(0);
  tracker->note_submitter();
  {
    const WaitTracker::Waiting waiting(tracker, "w");
    const WaitTracker::Snapshot snapshot = tracker->snapshot();
    EXPECT_TRUE(snapshot.blocked);
    EXPECT_EQ(snapshot.awaited, std::vector<std::string>{"w"});
  }
  EXPECT_FALSE(tracker->snapshot().blocked);
}

// A second submitter that is not waiting keeps the rank unblocked, until its thread exits.
TEST(WaitTracker, ASubmitterThatStillRunsKeepsTheRankUnblockedUntilItExits) {
  auto tracker = std::make_shared<WaitTracker>(0);
  tracker->note_submitter();
  std::mutex mutex;
  std::condition_variable cv;
  bool submitted = false;
  bool may_exit = false;
  std::thread other([&] {
    tracker->note_submitter();
    std::unique_lock<std::mutex> lock(mutex);
    submitted = true;
    cv.notify_all();
    cv.wait(lock, [&] { return may_exit; });
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return submitted; });
  }
  const WaitTracker::Waiting waiting(tracker, "x");
  EXPECT_FALSE(tracker->snapshot().blocked);
  {
    std::lock_guard<std::mutex> lock(mutex);
    may_exit = true;
  }
  cv.notify_all();
  other.join();
  EXPECT_TRUE(tracker->snapshot().blocked);  // the other submitter is gone
}

// A thread that never submitted may wait without keeping anything unblocked; it does not
// block the rank while the submitter runs.
TEST(WaitTracker, AWaitingNonSubmitterDoesNotBlockARunningSubmitter) {
  auto tracker = std::make_shared<WaitTracker>(0);
  tracker->note_submitter();
  bool blocked = true;
  on_other_thread([&] {
    const WaitTracker::Waiting waiting(tracker, "bucket");
    blocked = tracker->snapshot().blocked;
  });
  EXPECT_FALSE(blocked);
}

// A wait made for the submitter counts the submitter as waiting once it has been idle for
// kIdleSubmitter, not before.
TEST(WaitTracker, AWaitForAnIdleSubmitterBlocksAfterTheIdleTime) {
  auto tracker = std::make_shared<WaitTracker>(0);
  tracker->note_submitter();
  const WaitTracker::ThreadId submitter = WaitTracker::this_thread();
  const Clock::time_point now = Clock::now();
  WaitTracker::Snapshot soon;
  WaitTracker::Snapshot later;
  on_other_thread([&] {
    const WaitTracker::Waiting waiting(tracker, "bucket", submitter);
    soon = tracker->snapshot(now);
    later = tracker->snapshot(now + WaitTracker::kIdleSubmitter + std::chrono::milliseconds(10));
  });
  EXPECT_FALSE(soon.blocked);
  EXPECT_TRUE(later.blocked);
  EXPECT_EQ(later.awaited, std::vector<std::string>{"bucket"});
}

}  // namespace
}  // namespace ringd::fusion
