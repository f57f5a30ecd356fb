// ringd._core: the compiled half of the Python package (python/ringd/ is the other). It links
// libringd (ringd::ringd), which the wheel carries beside it (cmake/Python.cmake).
#include <nanobind/nanobind.h>

#include "bindings.h"
#include "ringd/config.h"
#include "tf_bridge.h"

NB_MODULE(_core, module) {
  module.doc() = "ringd's compiled core; import the package `ringd` instead.";
  module.attr("__version__") = RINGD_VERSION;
  ringd::python::bind_errors(module);
  ringd::python::bind_tensors(module);
  ringd::python::bind_job(module);
  ringd::python::bind_tf_bridge(module);
}
