#include "transport/completion.h"

namespace ringd {

void Completion::complete() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;
    done_ = true;
  }
  cv_.notify_all();
}

void Completion::fail(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

bool Completion::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

void Completion::wait(std::chrono::milliseconds timeout, const std::function<void()>& on_timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
    lock.unlock();
    on_timeout();
    return;
  }
  if (error_) std::rethrow_exception(error_);
}

}  // namespace ringd
