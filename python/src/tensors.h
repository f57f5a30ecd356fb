// A Python array as a ringd::Tensor: the collectives work in place on the array's own memory
// (no copy), so the array must be on the CPU, C-contiguous, writable and of a dtype ringd reduces.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>

#include "ringd/engine.h"

namespace ringd::python {

struct ArrayTensor {
  nanobind::ndarray<> view;  // the DLPack view of the array (shares its memory)
  Tensor tensor;             // view's memory, dtype and shape
};

// Throws TypeError (not an array; a dtype ringd does not reduce, named) or InvalidArgumentError
// (not on the CPU, not C-contiguous, read-only), naming `tensor_name`.
ArrayTensor tensor_from_array(nanobind::handle array, const std::string& tensor_name);

}  // namespace ringd::python
