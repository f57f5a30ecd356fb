// One worker's connection to one parameter server, with a thread that runs its requests in order
// (pushes as backward produces gradients, then the step's pull). Errors on that thread are kept
// and rethrown to the trainer at its next call (wait_pulled, or check before queueing more).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/parameter_sync.h"
#include "ps/frame.h"

namespace ringd::ps {

class ServerLink {
 public:
  // Connects to `address` (retrying until the timeout: servers may still be starting) and
  // registers `job`. `params` outlive the link; `owned` are this server's tensor indices.
  // `source` says where the address came from (e.g. "--ps-servers"), for errors that are the
  // address's fault: a host that does not resolve names the server, its index and `source`.
  ServerLink(int server_index, const std::string& address, const std::string& source,
             const JobDescription& job, const std::vector<model::ParameterView>* params,
             std::vector<size_t> owned, const std::string& secret,
             std::chrono::milliseconds timeout);
  ~ServerLink();  // stops the thread (after the queue ran), closing without BYE

  const std::string& name() const { return name_; }

  // Worker 0: sends the owned tensors' values, on the calling thread.
  void send_initial_values();
  // Queued on the link's thread; throw the link's stored error, if any.
  void push(size_t index, int64_t step, double learning_rate);
  void pull(int64_t after_step);
  // Blocks until every queued request ran; rethrows the link's first error.
  void wait_idle();
  // Clean goodbye (after wait_idle): the server counts this worker as finished.
  void say_bye();
  // This worker stops because of `why`: unless the link is in the middle of a request (or already
  // failed), an ERROR frame tells the server, which fails the step for the other workers with
  // this root cause instead of a bare "worker N closed its connection". Never blocks; drops what
  // is still queued.
  void give_up(const std::string& why);

 private:
  struct Request {
    bool is_pull = false;
    size_t index = 0;
    int64_t step = 0;
    double learning_rate = 0;
  };
  void run();
  void execute(const Request& request);
  void receive_values(int64_t after_step);
  void rethrow_locked();
  // An ERROR frame from the server as a ringd::Error.
  [[noreturn]] void throw_server_error(const Header& header, const std::string& what);

  const std::string name_;  // "parameter server 1 (10.0.0.2:7000)"
  const std::vector<model::ParameterView>* params_;
  const std::vector<size_t> owned_;
  std::unique_ptr<Connection> connection_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Request> queue_;  // guarded by mutex_
  bool busy_ = false;          // a request is running, guarded by mutex_
  bool stopping_ = false;      // guarded by mutex_
  std::exception_ptr error_;   // guarded by mutex_
  std::thread thread_;
};

}  // namespace ringd::ps
