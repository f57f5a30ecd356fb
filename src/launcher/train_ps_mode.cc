#include "launcher/train_ps_mode.h"

#include <CLI/CLI.hpp>

#include "ringd/error.h"

namespace ringd::launcher {

void add_ps_train_options(CLI::App& /*app*/, PsTrainOptions* /*options*/) {}

std::unique_ptr<model::ParameterSync> make_ps_sync(const PsTrainOptions& /*options*/,
                                                   Context& /*ctx*/,
                                                   const model::SgdOptions& /*sgd*/) {
  RINGD_THROW(kUnavailable,
              "ringd train --mode ps is not built yet (the parameter server, src/ps/, is not "
              "wired into the trainer); use --mode allreduce");
}

}  // namespace ringd::launcher
