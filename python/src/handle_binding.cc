#include "handle_binding.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ringd/error.h"

namespace nb = nanobind;

namespace ringd::python {
namespace {

constexpr std::chrono::milliseconds kWaitSlice{100};

const char* kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllreduce: return "allreduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kAllgather: return "allgather";
  }
  return "collective";
}

}  // namespace

bool python_signal_raised() {
  nb::gil_scoped_acquire acquire;
  return PyErr_CheckSignals() != 0;
}

nb::object PyHandle::wait(uint64_t for_thread) const {
  bool done = false;
  try {
    // Blocked for the whole wait (the engine's deadlock detector counts this thread as waiting);
    // every slice, the GIL is taken back briefly to look for Ctrl-C.
    nb::gil_scoped_release release;
    done = handle_.wait_unless(python_signal_raised, kWaitSlice, for_thread);
  } catch (const Error& e) {
    // A failure of the whole engine (a peer lost) names the engine's own operation; say which
    // of the caller's tensors it took down.
    const std::string quoted = "'" + handle_.name() + "'";
    if (std::string_view(e.what()).find(quoted) != std::string_view::npos) throw;
    throw Error(e.code(), "tensor " + quoted + " (" + kind_name(kind_) + "): " + e.what());
  }
  if (!done) throw nb::python_error();  // the signal handler's exception (KeyboardInterrupt)
  return array_;
}

nb::object PyHandle::output() const {
  if (kind_ != CollectiveKind::kAllgather) {
    throw Error(ErrorCode::kInvalidArgument,
                "ringd: tensor '" + handle_.name() + "' is a " + kind_name(kind_) +
                    ", whose result is in the array itself; only an allgather has an output()");
  }
  wait();
  const std::vector<uint8_t>& bytes = handle_.output();
  auto* copy = new uint8_t[bytes.size()];
  if (!bytes.empty()) std::memcpy(copy, bytes.data(), bytes.size());
  nb::capsule owner(copy, [](void* data) noexcept { delete[] static_cast<uint8_t*>(data); });
  const size_t shape[1] = {bytes.size()};
  return nb::cast(nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(copy, 1, shape, owner));
}

nb::tuple PyHandle::output_shape() const {
  wait();
  nb::list shape;
  for (int64_t extent : handle_.output_shape()) shape.append(extent);
  return nb::tuple(shape);
}

void bind_handle(nb::module_& module) {
  nb::class_<PyHandle>(module, "Handle", "One submitted collective; wait() for its result.")
      .def("wait", &PyHandle::wait, nb::arg("for_thread") = 0,
           "Blocks until done (Ctrl-C interrupts) and returns the array holding the result. "
           "for_thread: the threading.get_ident() of the thread that submitted it, when this "
           "is a completion thread finishing that thread's work (ringd's deadlock detector then "
           "counts that thread as waiting once it stops submitting).")
      .def("done", &PyHandle::done, "True once the operation has finished (or failed).")
      .def("output", &PyHandle::output,
           "allgather: waits, then returns the gathered rows (rank 0's first) as a flat uint8 "
           "NumPy array (a copy); view it as the input's dtype and reshape to output_shape().")
      .def("output_shape", &PyHandle::output_shape,
           "allgather: waits, then returns the gathered tensor's shape.")
      .def_prop_ro("name", &PyHandle::name)
      .def_prop_ro("kind", [](const PyHandle& handle) { return kind_name(handle.kind()); });
}

}  // namespace ringd::python
