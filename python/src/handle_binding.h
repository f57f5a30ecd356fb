// ringd.Handle: one submitted collective as Python sees it (python/src/handle_binding.cc).
#pragma once

#include <nanobind/nanobind.h>

#include <string>
#include <utility>

#include "ringd/engine.h"

namespace ringd::python {

class PyHandle {
 public:
  // `array` is what wait() returns: the caller's array, which the operation writes in place
  // (allgather leaves it as it was and puts the result in output()).
  PyHandle(Handle handle, nanobind::object array, CollectiveKind kind)
      : handle_(std::move(handle)), array_(std::move(array)), kind_(kind) {}

  // Blocks until done and returns the array; raises the RingdError the operation failed with, or
  // KeyboardInterrupt (the operation goes on: wait again, or shut the job down). Releases the GIL
  // and wakes every 100 ms to let Python handle signals.
  // `for_thread`: Handle::wait_unless's (a completion thread waiting for another thread's work).
  nanobind::object wait(uint64_t for_thread = 0) const;
  bool done() const { return handle_.done(); }
  const std::string& name() const { return handle_.name(); }
  CollectiveKind kind() const { return kind_; }
  // allgather: a copy of the gathered bytes as a flat uint8 NumPy array (the caller views it as
  // its dtype and output_shape()); waits first.
  nanobind::object output() const;
  nanobind::tuple output_shape() const;

 private:
  Handle handle_;
  nanobind::object array_;
  CollectiveKind kind_;
};

// For a wait with the GIL released (Handle::wait_unless, Job::open): takes the GIL back briefly
// and runs Python's signal handlers; true when one raised (KeyboardInterrupt is then set).
bool python_signal_raised();

void bind_handle(nanobind::module_& module);

}  // namespace ringd::python
