// Handle: waiting on a submitted tensor.
#include "common/logging.h"
#include "fusion/handle_state.h"
#include "ringd/error.h"

namespace ringd {
namespace detail {

void HandleState::finish(std::exception_ptr failure) {
  Callback run;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (done) return;
    run = std::move(callback);
  }
  // The callback runs first, so a caller whose wait() returned knows the callback has run.
  if (run) {
    try {
      run(failure);
    } catch (const std::exception& e) {
      RINGD_LOG(kError) << "the callback of tensor '" << name << "' threw: " << e.what()
                        << " (ignored; callbacks must not throw)";
    } catch (...) {
      RINGD_LOG(kError) << "the callback of tensor '" << name << "' threw (ignored)";
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    error = failure;
  }
  finished.notify_all();
}

}  // namespace detail

namespace {
const detail::HandleState& checked(const std::shared_ptr<detail::HandleState>& state) {
  if (!state) RINGD_THROW(kInvalidArgument, "this Handle is empty (default-constructed)");
  return *state;
}
}  // namespace

const std::string& Handle::name() const { return checked(state_).name; }

bool Handle::done() const {
  const detail::HandleState& state = checked(state_);
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.done;
}

void Handle::wait() const {
  const detail::HandleState& state = checked(state_);
  const fusion::WaitTracker::Waiting waiting(state.tracker, state.name);
  std::unique_lock<std::mutex> lock(state.mutex);
  state.finished.wait(lock, [&] { return state.done; });
  if (state.error) std::rethrow_exception(state.error);
}

bool Handle::wait_for(std::chrono::milliseconds timeout) const {
  const detail::HandleState& state = checked(state_);
  std::unique_lock<std::mutex> lock(state.mutex);
  if (!state.finished.wait_for(lock, timeout, [&] { return state.done; })) {
    return false;
  }
  if (state.error) std::rethrow_exception(state.error);
  return true;
}

bool Handle::wait_unless(const std::function<bool()>& interrupted, std::chrono::milliseconds every,
                         uint64_t for_thread) const {
  const detail::HandleState& state = checked(state_);
  const fusion::WaitTracker::Waiting waiting(state.tracker, state.name, for_thread);
  std::unique_lock<std::mutex> lock(state.mutex);
  while (!state.finished.wait_for(lock, every, [&] { return state.done; })) {
    lock.unlock();
    if (interrupted && interrupted()) return false;
    lock.lock();
  }
  if (state.error) std::rethrow_exception(state.error);
  return true;
}

const std::vector<uint8_t>& Handle::output() const { return checked(state_).output; }
const std::vector<int64_t>& Handle::output_shape() const { return checked(state_).output_shape; }

}  // namespace ringd
