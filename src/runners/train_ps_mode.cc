#include "runners/train_ps_mode.h"

#include <CLI/CLI.hpp>

#include "ps/worker_job.h"
#include "ringd/error.h"

namespace ringd::runners {

void add_ps_train_options(CLI::App& app, PsTrainOptions* options) {
  app.add_option("--ps-servers", options->servers,
                 "--mode ps: the servers (`ringd ps` on their own nodes), in one order on every "
                 "worker")
      ->type_name("HOST:PORT,...");
  app.add_option("--ps-colocate", options->colocate,
                 "--mode ps: workers 0..K-1 each host one server in their process (default 1 "
                 "without --ps-servers)")
      ->type_name("K")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--ps-port", options->port,
                 "--mode ps: worker r's co-located server listens on PORT + r (default: any "
                 "free port)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--ps-sharding", options->sharding,
                 "--mode ps: round-robin (default) or greedy (by size) placement of tensors")
      ->check(CLI::IsMember({"round-robin", "greedy"}));
  app.add_flag("--ps-async", options->asynchronous,
               "--mode ps: servers apply each push at once (no step barrier)");
}

std::unique_ptr<model::ParameterSync> make_ps_sync(const PsTrainOptions& options,
                                                   const std::string& interface, Context& ctx,
                                                   const model::SgdOptions& sgd) {
  ps::WorkerJobOptions job;
  if (!options.servers.empty()) {
    job.servers = ps::parse_server_list("--ps-servers", options.servers);
  }
  job.colocated = options.colocate;
  if (job.servers.empty() && job.colocated == 0) job.colocated = 1;
  job.colocated_port = static_cast<uint16_t>(options.port);
  job.sharding = ps::parse_shard_policy("--ps-sharding", options.sharding);
  job.asynchronous = options.asynchronous;
  job.interface = interface;
  // Servers of their own (`ringd ps`) know only RINGD_JOB_SECRET ("" here); co-located ones are
  // the job's own and take its secret (under mpirun perhaps one rank 0 made).
  if (job.servers.empty()) job.secret = options.secret;
  job.timeout = ctx.timeout();
  return ps::make_worker_sync(job, ctx, sgd);
}

}  // namespace ringd::runners
