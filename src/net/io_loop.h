// One epoll I/O thread. Sockets are registered edge-triggered (EPOLLIN | EPOLLOUT | EPOLLRDHUP)
// with a handler that makes as much progress as the socket allows each time it is called. Other
// threads hand work to the loop with wake(id) / post(task), which write an eventfd; timers give
// handshakes and store waits their deadlines. The thread sleeps in epoll_wait whenever there is
// nothing to do: nothing here polls.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "net/socket.h"

namespace ringd::net {

class IoHandler {
 public:
  virtual ~IoHandler() = default;
  // Runs on the loop thread: `events` are epoll events, or 0 when woken through IoLoop::wake.
  // Must not throw (the loop logs and drops exceptions).
  virtual void on_io(uint32_t events) = 0;
  // Called (on any thread, holding no lock) by IoLoop::restore_deferred_reads for handlers that
  // registered with defer_reads(): hand reading back to the loop.
  virtual void restore_reads() {}
};

class IoLoop {
 public:
  using Id = uint64_t;

  explicit IoLoop(std::string name);  // starts the thread
  ~IoLoop();                          // stop()
  IoLoop(const IoLoop&) = delete;
  IoLoop& operator=(const IoLoop&) = delete;

  // Registers `fd` with `handler`; callable from any thread. The handler owns the fd.
  Id add(int fd, std::shared_ptr<IoHandler> handler);
  // Registers one socket through two descriptors: `fd` for writability and hang-ups, `read_fd` (a
  // dup of it) for readability, so that read interest can be switched off and on without the
  // spurious EPOLLOUT report that re-arming a writable socket's single registration makes.
  Id add_split(int fd, int read_fd, std::shared_ptr<IoHandler> handler);
  // Turns EPOLLIN interest of add_split's `read_fd` off or back on (turning it on reports the
  // socket at once if it is readable). False (errno set) when epoll refused. Any thread.
  bool set_read_interest(Id id, int read_fd, bool wanted);
  // A handler that switched read interest off with nobody yet waiting on its socket records that
  // here; before any thread of the context sleeps on something else, restore_deferred_reads()
  // switches those back on, so a blocked thread never leaves a socket unread (no deadlock).
  void defer_reads(std::weak_ptr<IoHandler> handler);
  bool has_deferred_reads() const { return deferred_count_.load(std::memory_order_acquire) > 0; }
  void restore_deferred_reads();
  // Forgets the handler (and removes `fd` from epoll when fd >= 0). Once the loop thread has seen
  // the removal the handler is not called again.
  void remove(Id id, int fd);
  void remove_fd(int fd);  // add_split's read_fd, before remove()
  // Calls the handler's on_io(0) soon on the loop thread. Any thread.
  void wake(Id id);
  void post(std::function<void()> task);
  void add_timer(Deadline when, std::function<void()> task);
  // Stops and joins the thread; pending tasks and timers are dropped. Idempotent.
  void stop();
  bool on_loop_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void run();
  void register_fd(Id id, int fd, uint32_t events);  // throws; forgets the handler on failure
  void signal_locked();
  void dispatch(Id id, uint32_t events);
  void run_task(const std::function<void()>& task);
  int next_timeout_ms();

  const std::string name_;
  Fd epoll_;
  Fd event_fd_;
  std::mutex mutex_;
  bool stopping_ = false;                                        // guarded by mutex_
  bool signalled_ = false;                                       // eventfd written, not yet read
  Id next_id_ = 1;                                               // 0 is the eventfd
  std::unordered_map<Id, std::shared_ptr<IoHandler>> handlers_;  // guarded by mutex_
  std::vector<Id> wakes_;                                        // guarded by mutex_
  std::vector<std::function<void()>> tasks_;                     // guarded by mutex_
  std::multimap<Deadline, std::function<void()>> timers_;        // guarded by mutex_
  std::vector<std::weak_ptr<IoHandler>> deferred_;               // guarded by mutex_
  std::atomic<int> deferred_count_{0};
  std::thread thread_;
};

}  // namespace ringd::net
