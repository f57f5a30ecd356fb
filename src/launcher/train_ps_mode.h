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

namespace ringd::launcher {

// Flags of --mode ps (filled by add_ps_train_options).
struct PsTrainOptions {};

void add_ps_train_options(CLI::App& app, PsTrainOptions* options);

// This worker's PsSync. `ctx` is the job's Context (rank, size; unused by the engine in ps mode).
// Throws ringd::Error.
std::unique_ptr<model::ParameterSync> make_ps_sync(const PsTrainOptions& options, Context& ctx,
                                                   const model::SgdOptions& sgd);

}  // namespace ringd::launcher
