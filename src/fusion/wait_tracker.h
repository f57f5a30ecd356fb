// Which of this rank's threads can still submit, and which wait: the deadlock detector's view of
// one rank (controller.h, "Deadlocks and shutdowns").
//
//   submitters: threads that have submitted to the engine and are still alive (a thread-local
//               record removes a thread when it exits), with the time of their last submission
//   waiters:    threads inside Handle::wait() / wait_unless(), with the tensor each awaits
//
// The rank is *blocked* when some thread waits and every live submitter waits too: then nothing
// on this rank can submit again until a handle completes. Handle::wait_for() (a bounded wait,
// often a poll between other work) does not count as waiting. A thread that never submits (a
// completion thread) may wait without keeping the rank unblocked.
//
// A wait may be made *for* a submitter (wait_unless's `for_thread`): a completion thread that
// finishes what that thread submitted, while the thread itself waits somewhere ringd cannot see
// (DDP's reducer waits on a torch Future). Such a submitter counts as waiting once it has not
// submitted for kIdleSubmitter while a wait for it is under way.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/fork_guard.h"

namespace ringd::fusion {

class WaitTracker : public std::enable_shared_from_this<WaitTracker> {
 public:
  using Clock = std::chrono::steady_clock;
  using ThreadId = uint64_t;  // pthread_self(), as Python's threading.get_ident() gives it
  static constexpr std::chrono::milliseconds kIdleSubmitter{1000};

  explicit WaitTracker(int rank);

  static ThreadId this_thread();

  // Records the calling thread as a submitter (until it exits) and the time of its submission.
  void note_submitter();

  // One thread's blocking wait on the tensor `name`, for the scope's lifetime, made for
  // `for_thread` (0: for itself). Throws kInvalidArgument in a child forked after the engine
  // started (nothing would ever complete there).
  class Waiting {
   public:
    Waiting(std::shared_ptr<WaitTracker> tracker, const std::string& name, ThreadId for_thread = 0);
    ~Waiting();
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;

   private:
    std::shared_ptr<WaitTracker> tracker_;
  };

  struct Snapshot {
    bool blocked = false;
    Clock::time_point blocked_since{};  // since when every submitter waits (valid if blocked)
    std::vector<std::string> awaited;   // what the waiting threads wait on, sorted
  };
  Snapshot snapshot(Clock::time_point now = Clock::now()) const;
  // Just when the rank became blocked, or nullopt (cheap: checked every cycle).
  std::optional<Clock::time_point> blocked_since(Clock::time_point now) const;

 private:
  struct Waiter {
    std::string name;
    ThreadId for_thread = 0;
    Clock::time_point since;
  };

  void forget_thread(ThreadId id);
  bool blocked_locked(Clock::time_point now, Clock::time_point* blocked_since) const;

  const ForkOwner owner_;
  const int rank_;
  mutable std::mutex mutex_;
  std::map<ThreadId, Clock::time_point> submitters_;  // thread -> its last submission
  std::map<ThreadId, Waiter> waiters_;

  friend struct ThreadRecord;
};

}  // namespace ringd::fusion
