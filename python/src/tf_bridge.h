// The engine behind ringd's TensorFlow ops (python/ringd/tensorflow/ops.cc): the job opened from
// Python serves them through the C table of python/ringd/tensorflow/ringd_tf_bridge.h.
#pragma once

#include <nanobind/nanobind.h>

#include "ringd/engine.h"

namespace ringd::python {

// The engine that the ops submit to from now on (the job just opened).
void tf_bridge_attach(Engine* engine);
// Before `engine` shuts down: later submissions fail (the job is shut down). No-op when another
// engine is attached.
void tf_bridge_detach(Engine* engine);
// After `engine` has stopped: releases the buffers of ids whose wait never came.
void tf_bridge_forget_all();

// _tf_bridge_address(): the table's address, for ringd_tf_connect.
void bind_tf_bridge(nanobind::module_& module);

}  // namespace ringd::python
