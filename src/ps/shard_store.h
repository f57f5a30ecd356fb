// The variables one parameter server holds, and the rules of the job: who may register, which
// tensors this server owns, how pushes become updates. No sockets here (server.cc moves the
// bytes), so the aggregation is tested directly.
//
// Synchronous mode, one tensor, W workers, step s:
//
//   push(w=1, s) ─┐
//   push(w=0, s) ─┼─> slot[w] (one buffer per worker) ── all W in? ──> mean = (g0+g1+...+g(W-1))/W
//   push(w=2, s) ─┘                                                     Sgd.apply(value, mean, lr)
//                                                                       applied_step = s, wake
//                                                                       pulls
//
// The sum runs in worker-rank order whatever order the pushes came in, so a run is reproducible.
// A pull for step s waits until every owned tensor has applied s. A worker cannot push s+1 before
// its pull of s returned, so a slot is never overwritten while it is summed, and values are stable
// while a pull sends them (no copy).
//
// Asynchronous mode: each push is applied at once under the tensor's own lock (Hogwild-style, but
// never a torn tensor); pulls copy the current values under the same lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/optimizer.h"
#include "proto/ps.pb.h"

namespace ringd::ps {

class ShardStore {
 public:
  static constexpr int64_t kNoStep = INT64_MIN;

  // `name` prefixes errors and log lines ("parameter server 10.0.0.2:7000").
  explicit ShardStore(std::string name);

  // The first worker fixes the job (this server's index, the tensors it owns); every later one
  // must describe the same job. Throws kMismatch naming the differing field or tensor, or
  // kInvalidArgument for an impossible description. `from` names the worker's address.
  void register_worker(const JobDescription& job, const std::string& from);
  // The worker said BYE. True when every worker of the job has.
  bool worker_left(int rank);
  // The connection of a registered worker broke: the job fails (pulls answer with this error).
  void worker_lost(int rank, const std::string& why);
  // Ends every wait with `why` (server shutting down).
  void fail(const std::string& why);
  // Throws the job's failure, if it failed.
  void check() const;

  // What the job says (valid after the first registration).
  bool asynchronous() const;
  int server_index() const;
  std::string tensor_name(size_t index) const;
  const std::vector<size_t>& owned() const { return owned_; }
  size_t count_of(size_t index) const;
  size_t tensor_count() const;

  // INIT from worker 0: where to receive tensor `index`'s values, then init_done(). Throws
  // kInvalidArgument/kMismatch for a tensor this server does not own or one already set.
  float* begin_init(int rank, size_t index);
  void init_done(size_t index);

  // PUSH, synchronous: checks the step (kMismatch when workers are out of step) and returns the
  // worker's slot to receive the gradient into; push_done() adds it to the step and, once all W
  // are in, applies the mean. Asynchronous: begin_push only checks (returns nullptr); the caller
  // receives into its own buffer and calls apply_async().
  float* begin_push(int rank, size_t index, int64_t step);
  void push_done(int rank, size_t index, int64_t step, double learning_rate);
  void apply_async(size_t index, const float* grad, double learning_rate);

  // PULL: blocks until every owned tensor has applied `after_step` (-1: has initial values; async:
  // only that), then fills `out` with pointers to send (async: copies into `scratch`). Throws
  // kTimeout naming the tensor and the workers still missing once nothing happened on this server
  // (no push, pull or note_activity()) for `timeout`, or the job's failure. While it waits it
  // calls `waiting` (without the store's lock; may be empty) at most min(timeout / 3, 1 s) apart.
  void pull(int64_t after_step, std::chrono::milliseconds timeout, std::vector<const float*>* out,
            std::vector<std::vector<float>>* scratch,
            const std::function<void()>& waiting = nullptr);
  // Bytes of some worker's message are arriving: a waiting pull's timeout starts again.
  void note_activity();

  // Blocks until every worker of the job said BYE, or throws: the job's failure, or kTimeout
  // naming the workers still missing when no worker did anything for `idle_limit` (0 = wait
  // forever; a co-located server uses it so that a worker that never came cannot hang it).
  void wait_until_done(std::chrono::milliseconds idle_limit = std::chrono::milliseconds(0));

  int64_t applied_step(size_t index) const;

 private:
  struct Tensor {
    size_t index = 0;
    std::string name;
    std::vector<float> value;
    bool initialized = false;
    bool init_started = false;
    int64_t applied = kNoStep;              // last applied step (sync)
    int64_t pending = kNoStep;              // step being gathered (sync)
    std::vector<std::vector<float>> slots;  // one per worker (sync)
    std::vector<char> claimed;              // worker's push of `pending` is being received
    std::vector<char> arrived;              // ... and complete
    int arrived_count = 0;
    double learning_rate = 0;
    std::vector<float> sum;            // scratch for the mean (sync)
    std::unique_ptr<std::mutex> lock;  // async: one update or copy at a time
  };

  Tensor& owned_tensor(size_t index, const char* what);  // mutex_ held
  bool pull_ready(int64_t after_step) const;             // mutex_ held
  std::string missing_text(int64_t after_step) const;    // mutex_ held
  [[noreturn]] void throw_failure() const;               // mutex_ held

  const std::string name_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool have_job_ = false;
  JobDescription job_;
  std::vector<size_t> owned_;
  std::vector<int> slot_of_;  // tensor index -> position in tensors_, -1 when not owned
  std::vector<Tensor> tensors_;
  std::unique_ptr<model::Sgd> sgd_;
  std::vector<char> registered_;
  std::vector<char> left_;
  int registered_count_ = 0;
  int left_count_ = 0;
  std::chrono::steady_clock::time_point last_activity_ = std::chrono::steady_clock::now();
  bool failed_ = false;
  int failure_code_ = 0;
  std::string failure_;
};

}  // namespace ringd::ps
