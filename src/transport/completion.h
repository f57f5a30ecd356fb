// A one-shot completion flag with an error slot, shared by a Request and whatever completes it
// (the peer's thread for inproc, the I/O thread for tcp). wait() blocks on a condition variable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>

#include "ringd/transport.h"

namespace ringd {

class Completion {
 public:
  void complete();
  void fail(std::exception_ptr error);
  bool done() const;
  // Blocks until complete or failed (rethrows the error). After `timeout`, calls on_timeout(),
  // which must throw.
  void wait(std::chrono::milliseconds timeout, const std::function<void()>& on_timeout);

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// A Request that waits on a Completion; `describe` builds the timeout message lazily.
class CompletionRequest : public Request {
 public:
  CompletionRequest(std::shared_ptr<Completion> completion, std::function<void()> on_timeout)
      : completion_(std::move(completion)), on_timeout_(std::move(on_timeout)) {}
  void wait(std::chrono::milliseconds timeout) override { completion_->wait(timeout, on_timeout_); }

 private:
  std::shared_ptr<Completion> completion_;
  std::function<void()> on_timeout_;
};

}  // namespace ringd
