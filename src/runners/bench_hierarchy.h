// `ringd bench ... --local-devices L --hierarchy reduce-bcast|rs-ag`: the sweep through the
// hierarchical collectives (ringd/hierarchy.h). This process is one node with L devices: GPUs
// 0..L-1 (an NCCL local group) in builds with NCCL on a host with at least L GPUs, else L CPU
// devices; the table header says which. The Context joins the nodes. Sizes, --check patterns and
// the table are those of the flat bench over N x L ranks (device d of node r is rank r * L + d);
// the table adds nodebw (bench_report.h).
#pragma once

#include <cstdint>

#include "ringd/transport.h"
#include "runners/bench_config.h"

namespace ringd::runners {

// One node's sweep; rank 0 (`report`) prints the table and writes the JSON. Returns the number of
// wrong values over all sizes, nodes and devices (identical on every node).
int64_t run_hierarchy_sweep(Context& ctx, const BenchConfig& config, bool report);

}  // namespace ringd::runners
