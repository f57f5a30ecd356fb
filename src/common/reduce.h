// Element-wise reduction kernels on host memory, vectorised (AVX2/F16C where the CPU has them,
// chosen once at run time; portable loops otherwise).
//
// Precision: f16 and bf16 are widened to f32, combined, and rounded back once per call (round to
// nearest even), so a ring of n ranks rounds n-1 times, never more. Integer sum/prod wrap around
// (two's complement) like MPI. kAvg combines as kSum; the caller divides once at the end with
// scale_in_place(). min/max are commutative for non-NaN values, which keeps every rank bitwise
// identical no matter which operand order a step used.
#pragma once

#include <cstddef>

#include "ringd/types.h"

namespace ringd {

// dst[i] = a[i] (op) b[i] for i < count. dst may alias a or b exactly (in place); partial overlap
// is not allowed.
void reduce_into(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                 ReduceOp op);

// buf[i] *= factor (float types only; used to finish kAvg). Rounds once for f16/bf16.
void scale_in_place(void* buf, size_t count, DataType dtype, double factor);

// Which kernel family reduce_into uses on this CPU: "avx2+f16c" or "portable".
const char* reduce_kernel_isa();

}  // namespace ringd
