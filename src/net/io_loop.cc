#include "net/io_loop.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <exception>

#include "common/logging.h"
#include "ringd/error.h"

namespace ringd::net {

IoLoop::IoLoop(std::string name)
    : name_(std::move(name)),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      event_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!epoll_.valid() || !event_fd_.valid()) {
    RINGD_THROW(kIo, name_ << ": cannot create epoll/eventfd: " << errno_text(errno));
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = 0;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, event_fd_.get(), &event) != 0) {
    RINGD_THROW(kIo, name_ << ": epoll_ctl(eventfd): " << errno_text(errno));
  }
  thread_ = std::thread([this] { run(); });
}

IoLoop::~IoLoop() { stop(); }

void IoLoop::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    signal_locked();
  }
  if (thread_.joinable() && !on_loop_thread()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  handlers_.clear();
  tasks_.clear();
  timers_.clear();
}

IoLoop::Id IoLoop::add(int fd, std::shared_ptr<IoHandler> handler) {
  Id id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = next_id_++;
    handlers_[id] = std::move(handler);
  }
  register_fd(id, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET);
  return id;
}

IoLoop::Id IoLoop::add_split(int fd, int read_fd, std::shared_ptr<IoHandler> handler) {
  const Id id = add(read_fd, std::move(handler));
  set_read_interest(id, read_fd, true);  // EPOLLIN only on the read descriptor
  try {
    register_fd(id, fd, EPOLLOUT | EPOLLRDHUP | EPOLLET);
  } catch (...) {
    remove_fd(read_fd);
    throw;
  }
  return id;
}

void IoLoop::register_fd(Id id, int fd, uint32_t events) {
  epoll_event event{};
  event.events = events;
  event.data.u64 = id;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event) != 0) {
    const int error = errno;
    std::lock_guard<std::mutex> lock(mutex_);
    handlers_.erase(id);
    RINGD_THROW(kIo, name_ << ": epoll_ctl(ADD) failed: " << errno_text(error));
  }
}

bool IoLoop::set_read_interest(Id id, int read_fd, bool wanted) {
  epoll_event event{};
  event.events = EPOLLET | (wanted ? EPOLLIN : 0u);
  event.data.u64 = id;
  return ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, read_fd, &event) == 0;
}

void IoLoop::defer_reads(std::weak_ptr<IoHandler> handler) {
  std::lock_guard<std::mutex> lock(mutex_);
  deferred_.push_back(std::move(handler));
  deferred_count_.store(static_cast<int>(deferred_.size()), std::memory_order_release);
}

void IoLoop::restore_deferred_reads() {
  std::vector<std::weak_ptr<IoHandler>> deferred;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    deferred.swap(deferred_);
    deferred_count_.store(0, std::memory_order_release);
  }
  for (auto& weak : deferred) {
    if (auto handler = weak.lock()) handler->restore_reads();
  }
}

void IoLoop::remove_fd(int fd) { ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr); }

void IoLoop::remove(Id id, int fd) {
  if (fd >= 0) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  std::lock_guard<std::mutex> lock(mutex_);
  handlers_.erase(id);
}

void IoLoop::signal_locked() {
  if (signalled_) return;
  signalled_ = true;
  const uint64_t one = 1;
  ssize_t ignored = ::write(event_fd_.get(), &one, sizeof(one));
  (void)ignored;
}

void IoLoop::wake(Id id) {
  std::lock_guard<std::mutex> lock(mutex_);
  wakes_.push_back(id);
  signal_locked();
}

void IoLoop::post(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mutex_);
  tasks_.push_back(std::move(task));
  signal_locked();
}

void IoLoop::add_timer(Deadline when, std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool earliest = timers_.empty() || when < timers_.begin()->first;
  timers_.emplace(when, std::move(task));
  if (earliest && !on_loop_thread()) signal_locked();  // recompute the epoll_wait timeout
}

void IoLoop::dispatch(Id id, uint32_t events) {
  std::shared_ptr<IoHandler> handler;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = handlers_.find(id);
    if (found == handlers_.end()) return;
    handler = found->second;
  }
  try {
    handler->on_io(events);
  } catch (const std::exception& e) {
    RINGD_LOG(kError) << name_ << ": I/O handler failed: " << e.what();
  }
}

void IoLoop::run_task(const std::function<void()>& task) {
  try {
    task();
  } catch (const std::exception& e) {
    RINGD_LOG(kError) << name_ << ": I/O task failed: " << e.what();
  }
}

int IoLoop::next_timeout_ms() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (timers_.empty()) return -1;
  return static_cast<int>(std::min<int64_t>(remaining_ms(timers_.begin()->first), 1 << 30));
}

void IoLoop::run() {
  epoll_event events[64];
  for (;;) {
    const int count = ::epoll_wait(epoll_.get(), events, 64, next_timeout_ms());
    if (count < 0 && errno != EINTR) {
      RINGD_LOG(kError) << name_ << ": epoll_wait failed: " << errno_text(errno);
      return;
    }
    std::vector<Id> wakes;
    std::vector<std::function<void()>> tasks;
    std::vector<std::function<void()>> due;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      for (int i = 0; i < count; ++i) {
        if (events[i].data.u64 != 0) continue;
        uint64_t value;
        ssize_t ignored = ::read(event_fd_.get(), &value, sizeof(value));
        (void)ignored;
        signalled_ = false;
      }
      wakes.swap(wakes_);
      tasks.swap(tasks_);
      const Deadline now = Clock::now();
      while (!timers_.empty() && timers_.begin()->first <= now) {
        due.push_back(std::move(timers_.begin()->second));
        timers_.erase(timers_.begin());
      }
    }
    for (int i = 0; i < count; ++i) {
      if (events[i].data.u64 != 0) dispatch(events[i].data.u64, events[i].events);
    }
    for (Id id : wakes) dispatch(id, 0);
    for (auto& task : tasks) run_task(task);
    for (auto& task : due) run_task(task);
  }
}

}  // namespace ringd::net
