#include "tensors.h"

#include <cstdint>
#include <optional>
#include <string>

#include "bindings.h"
#include "ringd/error.h"
#include "ringd/types.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace ringd::python {
namespace {

constexpr const char* kSupportedDtypes = "float32, float64, float16, bfloat16, int32, int64, uint8";

// NumPy's spelling of a DLPack dtype, for messages: float32, int16, bool, complex64, ...
std::string dtype_spelling(nb::dlpack::dtype dtype) {
  using Code = nb::dlpack::dtype_code;
  std::string kind;
  switch (static_cast<Code>(dtype.code)) {
    case Code::Int: kind = "int"; break;
    case Code::UInt: kind = "uint"; break;
    case Code::Float: kind = "float"; break;
    case Code::Bfloat: kind = "bfloat"; break;
    case Code::Complex: kind = "complex"; break;
    case Code::Bool: kind = "bool"; break;
    default: kind = "DLPack type code " + std::to_string(dtype.code) + " of "; break;
  }
  std::string name = kind == "bool" ? kind : kind + std::to_string(dtype.bits);
  if (dtype.lanes != 1) name += " x " + std::to_string(dtype.lanes) + " lanes";
  return name;
}

std::optional<DataType> ringd_dtype(nb::dlpack::dtype dtype) {
  using Code = nb::dlpack::dtype_code;
  if (dtype.lanes != 1) return std::nullopt;
  switch (static_cast<Code>(dtype.code)) {
    case Code::Float:
      if (dtype.bits == 16) return DataType::kFloat16;
      if (dtype.bits == 32) return DataType::kFloat32;
      if (dtype.bits == 64) return DataType::kFloat64;
      break;
    case Code::Bfloat:
      if (dtype.bits == 16) return DataType::kBFloat16;
      break;
    case Code::Int:
      if (dtype.bits == 32) return DataType::kInt32;
      if (dtype.bits == 64) return DataType::kInt64;
      break;
    case Code::UInt:
      if (dtype.bits == 8) return DataType::kUInt8;
      break;
    default: break;
  }
  return std::nullopt;
}

// Row-major and dense; the strides of dimensions of extent 1 do not matter.
bool is_c_contiguous(const nb::ndarray<>& view) {
  if (view.stride_ptr() == nullptr || view.size() == 0) return true;
  int64_t expected = 1;
  for (size_t i = view.ndim(); i-- > 0;) {
    const auto extent = static_cast<int64_t>(view.shape(i));
    if (extent != 1 && view.stride(i) != expected) return false;
    expected *= extent;
  }
  return true;
}

nb::tuple tensor_for_test(nb::handle array) {
  ArrayTensor input = tensor_from_array(array, "_tensor_for_test");
  nb::list shape;
  for (int64_t extent : input.tensor.shape) shape.append(extent);
  return nb::make_tuple(dtype_name(input.tensor.dtype), nb::tuple(shape), input.tensor.bytes());
}

}  // namespace

ArrayTensor tensor_from_array(nb::handle array, const std::string& tensor_name) {
  ArrayTensor out;
  // No conversion: a converted copy would receive the result instead of the caller's array.
  if (!nb::try_cast(array, out.view, /*convert=*/false)) {
    nb::ndarray<nb::ro> read_only;
    if (nb::try_cast(array, read_only, /*convert=*/false)) {
      throw Error(ErrorCode::kInvalidArgument,
                  "ringd: tensor '" + tensor_name +
                      "' is read-only, and ringd writes the result into it; pass a writable "
                      "array (x.copy())");
    }
    // An array whose dtype neither DLPack nor the buffer protocol carries (float128, object). The
    // failed imports may leave a Python error set, which would fail the calls below.
    PyErr_Clear();
    std::string dtype;
    if (nb::hasattr(array, "dtype")) {
      const nb::object dtype_object = array.attr("dtype");
      dtype = std::string(" of dtype ") + nb::str(nb::handle(dtype_object)).c_str();
    }
    throw nb::type_error(("ringd: tensor '" + tensor_name +
                          "': expected a NumPy array (or another array with DLPack or the "
                          "buffer protocol) of one of " +
                          kSupportedDtypes + ", got " + Py_TYPE(array.ptr())->tp_name + dtype)
                             .c_str());
  }
  const std::optional<DataType> dtype = ringd_dtype(out.view.dtype());
  if (!dtype) {
    throw nb::type_error(("ringd: tensor '" + tensor_name + "' has dtype " +
                          dtype_spelling(out.view.dtype()) +
                          ", which ringd does not reduce; convert it to one of " + kSupportedDtypes)
                             .c_str());
  }
  if (out.view.device_type() != nb::device::cpu::value) {
    throw Error(ErrorCode::kInvalidArgument,
                "ringd: tensor '" + tensor_name + "' is not in CPU memory (DLPack device type " +
                    std::to_string(out.view.device_type()) + "); copy it to the host first");
  }
  if (!is_c_contiguous(out.view)) {
    throw Error(ErrorCode::kInvalidArgument,
                "ringd: tensor '" + tensor_name +
                    "' is not C-contiguous, and ringd works in place on the array's memory; "
                    "pass numpy.ascontiguousarray(x) and read the result from that array");
  }
  out.tensor.data = out.view.data();
  out.tensor.dtype = *dtype;
  out.tensor.shape.reserve(out.view.ndim());
  for (size_t i = 0; i < out.view.ndim(); ++i) {
    out.tensor.shape.push_back(static_cast<int64_t>(out.view.shape(i)));
  }
  return out;
}

void bind_tensors(nb::module_& module) {
  module.def("_tensor_for_test", &tensor_for_test, "array"_a,
             "What allreduce sees of `array`: (ringd dtype name, shape, bytes); a test hook.");
}

}  // namespace ringd::python
