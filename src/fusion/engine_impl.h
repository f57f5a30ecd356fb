// Engine::Impl: the submission side (any thread, under `mutex`) and the background thread's state
// (engine_loop.cc; touched only by that thread, apart from `pending`'s emptiness check, which the
// background thread itself makes while holding `mutex`).
//
//   caller threads                         background thread
//   --------------                         -----------------
//   submit(): check, reserve the name  ->  incoming  --(wake: idle, or buffer full)-->
//             Handle                       pending table -> Controller::run_cycle (negotiate)
//   Handle::wait() <------- finish() ----  Executor::run (fuse, collective, copy out)
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/fork_guard.h"
#include "fusion/controller.h"
#include "fusion/engine_config.h"
#include "fusion/executor.h"
#include "fusion/pending.h"
#include "fusion/timeline.h"
#include "ringd/engine.h"

namespace ringd {

struct Engine::Impl {
  Impl(Context& context, const EngineOptions& options);
  ~Impl();

  std::vector<Handle> submit(std::vector<Submission> members, const std::string& group);
  void shutdown(const std::string& reason, bool failed);

  // Background thread (engine_loop.cc).
  void run();
  void wait_for_cycle(std::unique_lock<std::mutex>& lock, fusion::Clock::time_point last_start,
                      fusion::Clock::time_point last_end);
  bool run_cycle(bool shutting_down, fusion::Clock::time_point start);
  void record_cycle(uint64_t cycle, const fusion::CycleOutcome& outcome,
                    const fusion::Executor::Counts& counts, fusion::Clock::time_point start,
                    fusion::Clock::time_point negotiated, fusion::Clock::time_point end);
  void complete(fusion::PendingTensor& tensor, std::exception_ptr error);
  void fail_everything(std::exception_ptr error);
  // The peers learn this rank's counts, pending tensors and reason in a state round.
  void describe(const fusion::PendingTable& pending, fusion::RankState& state);
  uint64_t done_count(const std::string& name) const;  // under `mutex`

  // Names whose completions are counted (for "after completing it 9 times"); later new names are
  // not, so that a job that names every call anew does not grow this without end.
  static constexpr size_t kCountedNames = 4096;

  // Its inherited() is true in a child forked after this engine started: nothing of it may be
  // touched there (common/fork_guard.h).
  const ForkOwner owner;
  Context& ctx;
  const fusion::EngineConfig config;
  std::unique_ptr<fusion::Timeline> timeline;

  mutable std::mutex mutex;
  std::condition_variable wake;
  std::vector<fusion::PendingTensor> incoming;
  size_t incoming_bytes = 0;
  std::unordered_set<std::string> in_flight;  // names submitted and not yet completed
  uint64_t next_seq = 0;
  bool stop_requested = false;
  std::string stop_reason;     // shutdown(reason): what the peers are told
  bool stop_failed = false;    // shutdown(..., failed)
  bool idle_waiting = false;   // the background thread sleeps with nothing to do
  std::exception_ptr stopped;  // set once the engine has stopped; later submissions throw it
  EngineStats stats;
  std::unordered_map<std::string, uint64_t> done_by_name;  // successful completions, per name
  const std::shared_ptr<fusion::WaitTracker> waits =
      std::make_shared<fusion::WaitTracker>(ctx.rank());

  fusion::PendingTable pending;
  std::unique_ptr<fusion::Controller> controller;
  std::unique_ptr<fusion::Executor> executor;
  std::thread thread;
};

}  // namespace ringd
