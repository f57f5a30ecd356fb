#include "fusion/wait_tracker.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "ringd/error.h"

namespace ringd::fusion {

// One per thread: the trackers this thread submitted to, told when the thread exits.
struct ThreadRecord {
  std::vector<std::weak_ptr<WaitTracker>> trackers;

  ~ThreadRecord() {
    const WaitTracker::ThreadId id = WaitTracker::this_thread();
    for (const std::weak_ptr<WaitTracker>& weak : trackers) {
      if (const std::shared_ptr<WaitTracker> tracker = weak.lock()) tracker->forget_thread(id);
    }
  }

  // Called once per tracker: on the thread's first submission to it.
  void remember(const std::shared_ptr<WaitTracker>& tracker) {
    // Drop trackers of engines that are gone, so a long-lived thread's list stays short.
    trackers.erase(std::remove_if(trackers.begin(), trackers.end(),
                                  [](const auto& weak) { return weak.expired(); }),
                   trackers.end());
    trackers.push_back(tracker);
  }
};

namespace {
thread_local ThreadRecord t_record;
}  // namespace

WaitTracker::WaitTracker(int rank) : rank_(rank) {}

WaitTracker::ThreadId WaitTracker::this_thread() { return static_cast<ThreadId>(pthread_self()); }

void WaitTracker::note_submitter() {
  const ThreadId id = this_thread();
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, inserted] = submitters_.insert_or_assign(id, Clock::now());
    first = inserted;
  }
  if (first) t_record.remember(shared_from_this());
}

void WaitTracker::forget_thread(ThreadId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  submitters_.erase(id);
}

WaitTracker::Waiting::Waiting(std::shared_ptr<WaitTracker> tracker, const std::string& name,
                              ThreadId for_thread)
    : tracker_(std::move(tracker)) {
  if (!tracker_) return;
  if (tracker_->owner_.inherited()) {
    const std::string message = tracker_->owner_.child_message(tracker_->rank_);
    tracker_ = nullptr;  // not ours: leave its lock alone
    throw Error(ErrorCode::kInvalidArgument, message);
  }
  std::lock_guard<std::mutex> lock(tracker_->mutex_);
  tracker_->waiters_[this_thread()] = Waiter{name, for_thread, Clock::now()};
}

WaitTracker::Waiting::~Waiting() {
  if (!tracker_) return;
  std::lock_guard<std::mutex> lock(tracker_->mutex_);
  tracker_->waiters_.erase(this_thread());
}

bool WaitTracker::blocked_locked(Clock::time_point now, Clock::time_point* blocked_since) const {
  if (waiters_.empty()) return false;
  Clock::time_point since{};
  for (const auto& [id, waiter] : waiters_) since = std::max(since, waiter.since);
  for (const auto& [id, last_submit] : submitters_) {
    if (waiters_.count(id)) continue;
    // Not waiting itself: blocked only if a wait for it runs and it has been idle long enough.
    const Clock::time_point idle_from = last_submit + kIdleSubmitter;
    bool covered = false;
    for (const auto& [other, waiter] : waiters_) {
      if (waiter.for_thread != id || now < idle_from) continue;
      covered = true;
      since = std::max(since, std::max(idle_from, waiter.since));
    }
    if (!covered) return false;
  }
  *blocked_since = since;
  return true;
}

std::optional<WaitTracker::Clock::time_point> WaitTracker::blocked_since(
    Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  Clock::time_point since{};
  if (!blocked_locked(now, &since)) return std::nullopt;
  return since;
}

WaitTracker::Snapshot WaitTracker::snapshot(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  Snapshot snapshot;
  snapshot.blocked = blocked_locked(now, &snapshot.blocked_since);
  for (const auto& [id, waiter] : waiters_) snapshot.awaited.push_back(waiter.name);
  std::sort(snapshot.awaited.begin(), snapshot.awaited.end());
  snapshot.awaited.erase(std::unique(snapshot.awaited.begin(), snapshot.awaited.end()),
                         snapshot.awaited.end());
  return snapshot;
}

}  // namespace ringd::fusion
