// `ringd bench <collective>`: joins the job (topology.h), builds a Context on the chosen transport,
// sweeps message sizes and prints the nccl-tests style table (bench_report.h) on rank 0.
#pragma once

#include "job/topology.h"
#include "runners/bench_config.h"

namespace ringd::cli {

// Resolves where this process sits and checks the configuration against it. Throws
// ringd::Error (kInvalidArgument / kUnavailable) for a configuration that cannot run.
job::Topology plan_bench(const runners::BenchConfig& config);

// Runs the sweep. Returns the process exit code: 0, or 1 when --check found wrong values. Throws
// ringd::Error on any communication failure.
int run_bench(const runners::BenchConfig& config, const job::Topology& topology);

}  // namespace ringd::cli
