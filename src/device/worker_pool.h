// A small persistent pool of threads that run one parallel loop at a time. The calling thread is
// worker 0 and does its share; the others sleep on a condition variable between calls (never
// busy-poll: on this project's machines ranks, and their pools, outnumber cores).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ringd::device {

class WorkerPool {
 public:
  // `workers` >= 1 counts the calling thread: workers - 1 threads are started.
  explicit WorkerPool(int workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return workers_; }

  // Runs task(i) for every i in [0, tasks), tasks <= size(); task 0 on the calling thread, the
  // others on pool threads. Returns when all are done, then rethrows the first exception any task
  // threw. One call at a time (concurrent callers are serialised).
  void run(int tasks, const std::function<void(int)>& task);

 private:
  void thread_main(int worker);

  const int workers_;
  std::mutex run_mutex_;  // serialises run()
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  uint64_t generation_ = 0;  // bumped for every run() that hands work to the threads
  const std::function<void(int)>* task_ = nullptr;
  int tasks_ = 0;
  int pending_ = 0;  // pool threads still working on this generation
  std::exception_ptr error_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace ringd::device
