#include "device/worker_pool.h"

#include "ringd/error.h"

namespace ringd::device {

WorkerPool::WorkerPool(int workers) : workers_(workers) {
  RINGD_CHECK_ARG(workers >= 1, "a worker pool needs at least one worker, got " << workers);
  threads_.reserve(static_cast<size_t>(workers - 1));
  for (int worker = 1; worker < workers; ++worker) {
    threads_.emplace_back([this, worker] { thread_main(worker); });
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void WorkerPool::run(int tasks, const std::function<void(int)>& task) {
  RINGD_CHECK_ARG(tasks >= 0 && tasks <= workers_,
                  "worker pool of " << workers_ << " asked to run " << tasks << " tasks");
  if (tasks == 0) return;
  std::lock_guard<std::mutex> serial(run_mutex_);
  if (tasks > 1) {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &task;
    tasks_ = tasks;
    pending_ = tasks - 1;
    error_ = nullptr;
    ++generation_;
  }
  if (tasks > 1) work_ready_.notify_all();

  std::exception_ptr own_error;
  try {
    task(0);
  } catch (...) {
    own_error = std::current_exception();
  }
  if (tasks == 1) {
    if (own_error) std::rethrow_exception(own_error);
    return;
  }
  std::exception_ptr pool_error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    work_done_.wait(lock, [&] { return pending_ == 0; });
    task_ = nullptr;
    pool_error = error_;
  }
  if (own_error) std::rethrow_exception(own_error);
  if (pool_error) std::rethrow_exception(pool_error);
}

void WorkerPool::thread_main(int worker) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    if (worker >= tasks_) continue;  // not needed this time
    const std::function<void(int)>* task = task_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*task)(worker);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !error_) error_ = error;
    if (--pending_ == 0) work_done_.notify_one();
  }
}

}  // namespace ringd::device
