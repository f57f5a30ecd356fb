// PsSync: the worker side of parameter-server mode behind the trainer's ParameterSync seam
// (model/parameter_sync.h). One connection and one sender thread per server (ServerLink):
//
//   backward ──gradient_ready(i)──> link of server_of[i] ──PUSH(step, i, grad)──> server
//   finish_step ──PULL(step) on every link──> each server answers VALUES (its tensors), received
//                                               straight into params[i].value; then return
//
// gradient_ready only queues, so a push goes out while backward computes the next layer's
// gradient (it reads params[i].grad, which the trainer leaves alone until finish_step returns).
// A link's queue runs in order, so a server sees a worker's pushes before its pull.
//
// initialize(): connect (job-secret handshake, retrying until RINGD_TIMEOUT while servers start),
// REGISTER the job, worker 0 sends INIT with its values (the trainer's seed), then every worker
// pulls those, so all start from worker 0's parameters, as in allreduce mode.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "model/optimizer.h"
#include "model/parameter_sync.h"
#include "ps/shard_map.h"

namespace ringd::ps {

struct PsSyncOptions {
  std::vector<std::string> servers;  // "host:port", in server-index order (same on every worker)
  std::string servers_source = "--ps-servers";  // where `servers` came from, for errors
  int rank = 0;                                 // this worker
  int workers = 1;
  ShardPolicy sharding = ShardPolicy::kRoundRobin;
  bool asynchronous = false;
  model::SgdOptions sgd;                 // what the servers apply
  std::string secret;                    // "" = RINGD_JOB_SECRET / _FILE
  std::chrono::milliseconds timeout{0};  // 0 = RINGD_TIMEOUT
};

class ServerLink;

class PsSync : public model::ParameterSync {
 public:
  explicit PsSync(PsSyncOptions options);
  // Says BYE to every server unless a step failed or an exception is unwinding; then it tells
  // each server why this worker stops (the error of the failed step, when it was one of ours), and
  // the servers fail the step for the other workers with that cause.
  ~PsSync() override;

  void initialize(const std::vector<model::ParameterView>& params) override;
  void gradient_ready(size_t index, const model::StepInfo& step) override;
  void finish_step(const model::StepInfo& step) override;
  double blocked_seconds() const override { return blocked_seconds_; }

  // The server of each tensor (after initialize).
  const std::vector<int>& server_of() const { return server_of_; }

 private:
  void pull_all(int64_t after_step);  // on every link; rethrows the first error
  // In a catch block: the step failed; keeps the error's text for the servers.
  void note_failure();

  PsSyncOptions options_;
  std::vector<model::ParameterView> params_;
  std::vector<int> server_of_;
  std::vector<std::unique_ptr<ServerLink>> links_;
  double blocked_seconds_ = 0;
  bool failed_ = false;
  std::string failure_;  // what made a step fail, "" while none did
};

}  // namespace ringd::ps
