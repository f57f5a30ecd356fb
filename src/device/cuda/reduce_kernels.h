// Element-wise reduction kernels on GPU memory: the device twin of common/reduce.h, used by the
// NCCL local group to combine buffers that already live on a GPU. Only in CUDA builds
// (RINGD_HAVE_CUDA); this header may be included from plain C++ (it needs only the CUDA runtime
// API header, not nvcc).
//
// Semantics are those of reduce_into() / scale_in_place() in common/reduce.h, bit for bit (NaN
// payloads from sum and prod excepted); element_ops.cuh spells them out. In short: f16/bf16
// combine in f32 and round once; integer sum/prod wrap around; min/max return an operand and are
// bitwise commutative; kAvg combines as kSum (finish with cuda_scale_in_place) and is rejected
// for integers; dst may alias a or b exactly, partial overlap is not allowed.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "ringd/types.h"

namespace ringd {

// Number of CUDA devices this process can use. 0 when there is no driver, no GPU, or the driver is
// too old for this runtime; never throws and never aborts.
int cuda_device_count();

// Why cuda_device_count() returns 0, as the CUDA runtime words it (e.g. "no CUDA-capable device
// is detected"); "no error" when there are devices.
const char* cuda_device_status();

// dst[i] = a[i] (op) b[i] for i < count, queued on `stream` (asynchronous: synchronise the stream
// before reading dst on the host). All three pointers are device (or managed) memory on the
// current device. Throws ringd::Error: kInvalidArgument for an unsupported dtype/op pair or null
// buffers, kUnavailable when there is no usable device, kInternal when the launch fails.
void cuda_reduce_into(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                      ReduceOp op, cudaStream_t stream);

// buf[i] *= factor for float dtypes (finishes kAvg), formed as scale_in_place() forms it: in f32
// with the factor rounded to f32 for float, half and bfloat16, in f64 for double. Asynchronous on
// `stream`, like cuda_reduce_into.
void cuda_scale_in_place(void* buf, size_t count, DataType dtype, double factor,
                         cudaStream_t stream);

namespace detail {
// The kernels' per-element code (element_ops.cuh) run on the host, no GPU involved: lets tests on
// machines without a GPU check the kernels' arithmetic against reduce_into(). Not for production.
void emulate_cuda_reduce_on_host(void* dst, const void* a, const void* b, size_t count,
                                 DataType dtype, ReduceOp op);
void emulate_cuda_scale_on_host(void* buf, size_t count, DataType dtype, double factor);
}  // namespace detail

}  // namespace ringd
