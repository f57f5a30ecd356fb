// ringd::Error in Python: RingdError (a RuntimeError) and one subclass per ringd::ErrorCode, each
// carrying the C++ message (file:line breadcrumbs included) and, as the class attribute `code`,
// the code's short name. docs/errors.md describes the codes.
#include "errors.h"

#include <nanobind/stl/string.h>

#include <exception>
#include <iterator>
#include <string>

#include "bindings.h"
#include "ringd/error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace ringd::python {
namespace {

struct ErrorClass {
  ErrorCode code;
  const char* code_name;   // the class's `code` attribute, and what _raise_for_test takes
  const char* class_name;  // in the package ringd
  bool is_value_error;     // also a ValueError: the caller passed something unusable
  const char* doc;
  const char* parent = nullptr;  // the class_name of an earlier entry to derive from
};

// Names that Python's builtins already use (TimeoutError, IOError) take the prefix Ringd, so that
// importing them from ringd shadows nothing.
constexpr ErrorClass kErrorClasses[] = {
    {ErrorCode::kInvalidArgument, "invalid_argument", "InvalidArgumentError", true,
     "The caller passed something unusable (a bad size, dtype, op or option)."},
    {ErrorCode::kTimeout, "timeout", "RingdTimeoutError", false,
     "A blocking wait ran past its deadline (RINGD_TIMEOUT, or the job's timeout)."},
    {ErrorCode::kPeerLost, "peer_lost", "PeerLostError", false,
     "A peer closed its connection or died."},
    {ErrorCode::kProtocol, "protocol", "ProtocolError", false,
     "A message was malformed, foreign, truncated or of another version."},
    {ErrorCode::kAuth, "auth", "AuthError", false, "A peer failed the job-secret handshake."},
    {ErrorCode::kMismatch, "mismatch", "MismatchError", false,
     "The ranks disagree (shapes, dtypes, ops, the order of collectives)."},
    {ErrorCode::kIo, "io", "RingdIOError", false,
     "An operating-system call failed (socket, file)."},
    {ErrorCode::kUnavailable, "unavailable", "UnavailableError", false,
     "A backend was not built in or has no device."},
    {ErrorCode::kInternal, "internal", "InternalError", false, "A bug in ringd."},
    {ErrorCode::kDeadlock, "deadlock", "DeadlockError", false,
     "No rank can make progress: each waits on collectives that another rank will not submit "
     "(different orders, uneven steps). A MismatchError.",
     "MismatchError"},
};

// Created when _core is imported and kept for the life of the process (the translator needs
// them); indexed like kErrorClasses.
PyObject* g_error_classes[std::size(kErrorClasses)] = {};
PyObject* g_base_class = nullptr;

nb::object new_exception_class(const char* name, const char* doc, nb::handle bases) {
  const std::string qualified = std::string("ringd.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (cls == nullptr) throw nb::python_error();
  return nb::steal(cls);
}

PyObject* class_for(ErrorCode code) {
  for (size_t i = 0; i < std::size(kErrorClasses); ++i) {
    if (kErrorClasses[i].code == code) return g_error_classes[i];
  }
  return g_base_class;  // a code newer than this table
}

void translate_error(const std::exception_ptr& error, void* /*payload*/) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    PyErr_SetString(class_for(e.code()), e.what());
  }
}

[[noreturn]] void raise_for_test(const std::string& code_name, const std::string& message) {
  std::string names;
  for (const ErrorClass& error_class : kErrorClasses) {
    if (code_name == error_class.code_name) throw Error(error_class.code, message);
    names += names.empty() ? "" : ", ";
    names += error_class.code_name;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "_raise_for_test: unknown error code '" + code_name + "'; use one of " + names);
}

}  // namespace

const char* error_code_python_name(ErrorCode code) {
  for (const ErrorClass& error_class : kErrorClasses) {
    if (error_class.code == code) return error_class.code_name;
  }
  return "internal";
}

void bind_errors(nb::module_& module) {
  nb::object base = new_exception_class(
      "RingdError", "Base class of every error ringd raises; str() is the C++ message.",
      nb::handle(PyExc_RuntimeError));
  module.attr("RingdError") = base;
  nb::dict by_code;
  for (size_t i = 0; i < std::size(kErrorClasses); ++i) {
    const ErrorClass& error_class = kErrorClasses[i];
    nb::object bases = error_class.is_value_error
                           ? nb::object(nb::make_tuple(base, nb::handle(PyExc_ValueError)))
                           : base;
    if (error_class.parent != nullptr) bases = module.attr(error_class.parent);
    nb::object cls = new_exception_class(error_class.class_name, error_class.doc, bases);
    cls.attr("code") = error_class.code_name;
    module.attr(error_class.class_name) = cls;
    by_code[error_class.code_name] = cls;
    g_error_classes[i] = cls.release().ptr();
  }
  g_base_class = base.release().ptr();
  module.attr("_error_classes") = by_code;

  nb::register_exception_translator(translate_error);
  module.def("_raise_for_test", &raise_for_test, "code_name"_a, "message"_a,
             "Throws ringd::Error(code, message) in C++ (a test hook for the translation).");
}

}  // namespace ringd::python
