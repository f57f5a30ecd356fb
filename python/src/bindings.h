// The pieces of the extension module ringd._core (python/src/module.cc puts them together). Each
// bind_* adds its classes and functions to the module; the Python package python/ringd/ re-exports
// them.
#pragma once

#include <nanobind/nanobind.h>

namespace ringd::python {

// RingdError and one subclass per ringd::ErrorCode, the translator from ringd::Error to them, and
// the test hook _raise_for_test(code_name, message).
void bind_errors(nanobind::module_& module);

// The test hook _tensor_for_test(array): what allreduce would see of an array (tensors.h).
void bind_tensors(nanobind::module_& module);

// Job and Handle: a job (include/ringd/job.h) and its collectives on arrays — allreduce, grouped
// allreduce, broadcast, allgather (python/src/job_binding.cc, handle_binding.cc).
void bind_job(nanobind::module_& module);

}  // namespace ringd::python
