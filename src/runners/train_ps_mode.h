// The hook between `ringd train` and parameter-server mode (src/ps/): the flags only ps mode has,
// and how a worker gets its ParameterSync. Everything else (model, data, optimizer, schedule,
// checkpoints, output) is the same code in both modes.
#pragma once

#include <memory>
#include <string>

#include "model/optimizer.h"
#include "model/parameter_sync.h"
#include "ringd/transport.h"

namespace CLI {
class App;
}

namespace ringd::runners {

// Flags of --mode ps (filled by add_ps_train_options; see src/ps/worker_job.h).
struct PsTrainOptions {
  std::string servers;                   // --ps-servers h1:p1,h2:p2 (servers on their own nodes)
  int colocate = 0;                      // --ps-colocate K (workers 0..K-1 host one each)
  int port = 0;                          // --ps-port: worker r's server on PORT + r (0 = any)
  std::string sharding = "round-robin";  // --ps-sharding round-robin|greedy
  bool asynchronous = false;             // --ps-async
  std::string
      secret;  // not a flag: the job's secret (job::JobContext::secret; "" = RINGD_JOB_SECRET)
};

void add_ps_train_options(CLI::App& app, PsTrainOptions* options);

// This worker's PsSync (with its co-located server, if it hosts one). `ctx` gives rank, size and
// the job's timeout, and carries the co-located servers' addresses: every rank must call this.
// A co-located server advertises the address of `interface` (the job's --iface; empty =
// RINGD_IFACE, else the host name's address), as the job's own tcp transport does.
// Without --ps-servers and --ps-colocate, worker 0 hosts the one server. Throws ringd::Error.
std::unique_ptr<model::ParameterSync> make_ps_sync(const PsTrainOptions& options,
                                                   const std::string& interface, Context& ctx,
                                                   const model::SgdOptions& sgd);

}  // namespace ringd::runners
