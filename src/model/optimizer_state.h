// Implemented by a ParameterSync that runs the optimizer in this process (allreduce mode), so the
// trainer can checkpoint the momentum and restore it on --resume. In ps mode the momentum lives on
// the servers and a checkpoint holds parameters only.
#pragma once

#include "model/optimizer.h"

namespace ringd::model {

class LocalOptimizer {
 public:
  virtual ~LocalOptimizer() = default;
  virtual Sgd& optimizer() = 0;
};

}  // namespace ringd::model
