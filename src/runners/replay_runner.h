// One rank of `ringd bench replay`: a one-buffer allreduce of every gradient byte (the ideal's
// communication), then the steps: each rank emits the profile's gradients in reverse order, one
// every share of the modeled compute (sleeping until it), through a fusion Engine, and waits for
// all of them. Afterwards the ranks combine their measurements (slowest rank per step; per cycle,
// the negotiation time of the fastest rank, which did not wait for anybody) so every rank returns
// the same summary.
#pragma once

#include "model/gradient_profile.h"
#include "ringd/transport.h"
#include "runners/replay_report.h"

namespace ringd::runners {

ReplaySummary run_replay_rank(Context& ctx, const ReplayConfig& config,
                              const model::GradientProfile& profile);

}  // namespace ringd::runners
