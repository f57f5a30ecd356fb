// The shared state behind a Handle: a one-shot completion with an error slot, the allgather
// output, and the caller's callback. Completed once, by the engine's background thread.
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "fusion/wait_tracker.h"
#include "ringd/engine.h"

namespace ringd::detail {

struct HandleState {
  HandleState(std::string tensor_name, Callback done_callback,
              std::shared_ptr<fusion::WaitTracker> wait_tracker = nullptr)
      : name(std::move(tensor_name)),
        tracker(std::move(wait_tracker)),
        callback(std::move(done_callback)) {}

  // Runs the callback on the calling thread, then marks the operation done (error = null:
  // success) and wakes the waiters. A callback that throws is logged, never propagated.
  void finish(std::exception_ptr error);

  const std::string name;
  // The engine's view of who waits (the deadlock detector); null for handles made elsewhere.
  const std::shared_ptr<fusion::WaitTracker> tracker;
  std::vector<uint8_t> output;  // allgather; written before finish()
  std::vector<int64_t> output_shape;

  mutable std::mutex mutex;
  mutable std::condition_variable finished;
  bool done = false;
  std::exception_ptr error;
  Callback callback;
};

}  // namespace ringd::detail
