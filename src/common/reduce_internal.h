// Private to src/common (and its tests and benchmarks): the kernel families behind reduce.h, so a
// test can check that they agree bit for bit and a benchmark can time each. Callers elsewhere use
// reduce_into() / scale_in_place(), which check their arguments and pick a family once.
//
// These functions expect checked arguments: count > 0, non-null buffers, a valid dtype, and
// reduce_op_supported(dtype, op). kAvg combines as kSum.
#pragma once

#include <cstddef>

#include "ringd/types.h"

#if defined(__x86_64__) || defined(__i386__)
#define RINGD_REDUCE_HAVE_AVX2_KERNELS 1
#else
#define RINGD_REDUCE_HAVE_AVX2_KERNELS 0
#endif

namespace ringd::detail {

// Plain C++ loops; the reference the vector kernels must match.
void reduce_into_portable(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                          ReduceOp op);
void scale_in_place_portable(void* buf, size_t count, DataType dtype, double factor);

#if RINGD_REDUCE_HAVE_AVX2_KERNELS
// True when this CPU (and OS) runs AVX2, F16C and FMA code; the AVX2 kernels may be called only
// then.
bool cpu_has_avx2_kernels();
void reduce_into_avx2(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                      ReduceOp op);
void scale_in_place_avx2(void* buf, size_t count, DataType dtype, double factor);
#endif

}  // namespace ringd::detail
