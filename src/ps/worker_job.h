// How a `ringd train --mode ps` process becomes a parameter-server worker (and, co-located, also a
// server): where the servers are, then a PsSync to them.
//
//   servers on their own nodes   --ps-servers h1:p1,h2:p2   (each started with `ringd ps`)
//   co-located                   --ps-colocate K            workers 0..K-1 each host one server
//                                                           in-process; the addresses are
//                                                           allgathered over the job's Context
//
// A co-located server must outlive every worker's use of it, so the returned ParameterSync, when
// destroyed, first says goodbye as a worker and then waits until every worker has (or the job
// failed) before closing its server.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/optimizer.h"
#include "model/parameter_sync.h"
#include "ps/shard_map.h"
#include "ringd/transport.h"

namespace ringd::ps {

struct WorkerJobOptions {
  std::vector<std::string> servers;  // "host:port" of servers on their own nodes
  int colocated = 0;                 // or: workers 0..colocated-1 host a server each
  uint16_t colocated_port = 0;       // worker r's server listens on this + r (0 = any port)
  std::string interface;             // advertise this interface's address (default RINGD_IFACE)
  ShardPolicy sharding = ShardPolicy::kRoundRobin;
  bool asynchronous = false;
  std::string secret;                    // "" = RINGD_JOB_SECRET / _FILE
  std::chrono::milliseconds timeout{0};  // 0 = RINGD_TIMEOUT
};

// "h1:p1,h2:p2" -> addresses (checked); throws kInvalidArgument naming `flag`.
std::vector<std::string> parse_server_list(const std::string& flag, const std::string& text);

// Exactly one of servers / colocated must be given (kInvalidArgument otherwise). `ctx` supplies
// rank and size, and carries the co-located servers' addresses (one allgather, every rank must
// call this). Throws ringd::Error.
std::unique_ptr<model::ParameterSync> make_worker_sync(const WorkerJobOptions& options,
                                                       Context& ctx, const model::SgdOptions& sgd);

}  // namespace ringd::ps
