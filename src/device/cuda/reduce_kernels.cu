// The CUDA reduce and scale kernels and their host launchers (semantics: element_ops.cuh).
//
// One kernel per (element type, op): a grid-stride loop that moves 16 bytes per thread per step
// when dst, a and b are all 16-byte aligned (one vector load from each input, one vector store),
// and one element per step otherwise and for the tail. Each element is read and written by the same
// thread, so dst may alias a or b exactly.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "device/cuda/cuda_errors.h"
#include "device/cuda/element_ops.cuh"
#include "device/cuda/reduce_kernels.h"
#include "ringd/error.h"

namespace ringd {
namespace {

using cuda_ops::combine;

// 16 bytes of elements, loaded and stored as one vector.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kElements = 16 / sizeof(T);
  T values[kElements];
};

template <typename T, ReduceOp kOp>
__global__ void reduce_kernel(T* dst, const T* a, const T* b, size_t count, bool aligned) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t scalar_begin = 0;
  if (aligned) {
    constexpr int kPer = Pack<T>::kElements;
    const size_t packs = count / kPer;
    auto* dst_packs = reinterpret_cast<Pack<T>*>(dst);
    const auto* a_packs = reinterpret_cast<const Pack<T>*>(a);
    const auto* b_packs = reinterpret_cast<const Pack<T>*>(b);
    for (size_t p = first; p < packs; p += stride) {
      const Pack<T> x = a_packs[p];
      const Pack<T> y = b_packs[p];
      Pack<T> out;
#pragma unroll
      for (int k = 0; k < kPer; ++k) out.values[k] = combine<T, kOp>(x.values[k], y.values[k]);
      dst_packs[p] = out;
    }
    scalar_begin = packs * kPer;
  }
  for (size_t i = scalar_begin + first; i < count; i += stride) {
    dst[i] = combine<T, kOp>(a[i], b[i]);
  }
}

template <typename T>
__global__ void scale_kernel(T* buf, size_t count, double factor) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    buf[i] = cuda_ops::scale(buf[i], factor);
  }
}

constexpr int kThreadsPerBlock = 256;
constexpr size_t kMaxBlocks = 4096;  // grid-stride beyond this: enough to fill any current GPU

unsigned blocks_for(size_t work_items) {
  const size_t blocks = (work_items + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(std::clamp<size_t>(blocks, 1, kMaxBlocks));
}

bool is_aligned_16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

// Runs `Run::template reduce<T, kOp>(...)` for a runtime dtype and op (kAvg combines as kSum).
template <typename Run, typename T>
void dispatch_op(ReduceOp op, const Run& run) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return run.template reduce<T, ReduceOp::kSum>();
    case ReduceOp::kMin: return run.template reduce<T, ReduceOp::kMin>();
    case ReduceOp::kMax: return run.template reduce<T, ReduceOp::kMax>();
    case ReduceOp::kProd: return run.template reduce<T, ReduceOp::kProd>();
  }
}

template <typename Run>
void dispatch(DataType dtype, ReduceOp op, const Run& run) {
  switch (dtype) {
    case DataType::kFloat32: return dispatch_op<Run, float>(op, run);
    case DataType::kFloat64: return dispatch_op<Run, double>(op, run);
    case DataType::kFloat16: return dispatch_op<Run, __half>(op, run);
    case DataType::kBFloat16: return dispatch_op<Run, __nv_bfloat16>(op, run);
    case DataType::kInt32: return dispatch_op<Run, int32_t>(op, run);
    case DataType::kInt64: return dispatch_op<Run, int64_t>(op, run);
    case DataType::kUInt8: return dispatch_op<Run, uint8_t>(op, run);
  }
}

// Runs `Run::template scale<T>()` for a runtime float dtype.
template <typename Run>
void dispatch_float(DataType dtype, const Run& run) {
  switch (dtype) {
    case DataType::kFloat32: return run.template scale<float>();
    case DataType::kFloat64: return run.template scale<double>();
    case DataType::kFloat16: return run.template scale<__half>();
    case DataType::kBFloat16: return run.template scale<__nv_bfloat16>();
    default: return;  // integers are rejected before dispatch
  }
}

struct Arguments {
  void* dst;
  const void* a;
  const void* b;
  size_t count;
  double factor;
};

struct LaunchOnDevice {
  Arguments args;
  cudaStream_t stream;

  template <typename T, ReduceOp kOp>
  void reduce() const {
    const bool aligned = is_aligned_16(args.dst) && is_aligned_16(args.a) && is_aligned_16(args.b);
    const size_t work = aligned ? args.count / Pack<T>::kElements + Pack<T>::kElements : args.count;
    reduce_kernel<T, kOp><<<blocks_for(work), kThreadsPerBlock, 0, stream>>>(
        static_cast<T*>(args.dst), static_cast<const T*>(args.a), static_cast<const T*>(args.b),
        args.count, aligned);
  }
  template <typename T>
  void scale() const {
    scale_kernel<T><<<blocks_for(args.count), kThreadsPerBlock, 0, stream>>>(
        static_cast<T*>(args.dst), args.count, args.factor);
  }
};

struct RunOnHost {
  Arguments args;

  template <typename T, ReduceOp kOp>
  void reduce() const {
    T* dst = static_cast<T*>(args.dst);
    const T* a = static_cast<const T*>(args.a);
    const T* b = static_cast<const T*>(args.b);
    for (size_t i = 0; i < args.count; ++i) dst[i] = combine<T, kOp>(a[i], b[i]);
  }
  template <typename T>
  void scale() const {
    T* buf = static_cast<T*>(args.dst);
    for (size_t i = 0; i < args.count; ++i) buf[i] = cuda_ops::scale(buf[i], args.factor);
  }
};

void throw_if_launch_failed(const char* what, size_t count, DataType dtype, const char* op_name) {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return;
  if (cuda_means_no_device(error)) {
    RINGD_THROW(kUnavailable, what << "(" << dtype_name(dtype) << " " << op_name << ", " << count
                                   << " elements): no usable CUDA device ("
                                   << cudaGetErrorString(error)
                                   << "); run on a GPU node or use the CPU local group");
  }
  int device = -1;
  cudaGetDevice(&device);
  cudaGetLastError();
  RINGD_THROW(kInternal, what << "(" << dtype_name(dtype) << " " << op_name << ", " << count
                              << " elements) failed on CUDA device " << device << ": "
                              << cudaGetErrorString(error)
                              << "; check that every buffer is device memory of the current "
                                 "device and that the stream belongs to it");
}

void check_reduce_arguments(const char* what, const void* dst, const void* a, const void* b,
                            size_t count, DataType dtype, ReduceOp op) {
  RINGD_CHECK_ARG(reduce_op_supported(dtype, op),
                  what << ": op " << reduce_op_name(op) << " is not defined for dtype "
                       << dtype_name(dtype) << "; use sum and divide, or a float type");
  RINGD_CHECK_ARG(count == 0 || (dst != nullptr && a != nullptr && b != nullptr),
                  what << "(" << dtype_name(dtype) << " " << reduce_op_name(op) << ", " << count
                       << " elements): null buffer");
}

void check_scale_arguments(const char* what, const void* buf, size_t count, DataType dtype) {
  RINGD_CHECK_ARG(dtype_is_float(dtype), what << ": dtype " << dtype_name(dtype)
                                              << " is not a float type; only float, double, half "
                                                 "and bfloat16 can be scaled");
  RINGD_CHECK_ARG(count == 0 || buf != nullptr,
                  what << "(" << dtype_name(dtype) << ", " << count << " elements): null buffer");
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear it, so later launches report their own errors
    return 0;
  }
  return count;
}

const char* cuda_device_status() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  cudaGetLastError();
  if (error == cudaSuccess && count == 0) return cudaGetErrorString(cudaErrorNoDevice);
  return cudaGetErrorString(error);
}

void cuda_reduce_into(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                      ReduceOp op, cudaStream_t stream) {
  check_reduce_arguments("cuda_reduce_into", dst, a, b, count, dtype, op);
  if (count == 0) return;
  cudaGetLastError();  // an earlier, unrelated error must not be blamed on this launch
  dispatch(dtype, op, LaunchOnDevice{{dst, a, b, count, 0.0}, stream});
  throw_if_launch_failed("cuda_reduce_into", count, dtype, reduce_op_name(op));
}

void cuda_scale_in_place(void* buf, size_t count, DataType dtype, double factor,
                         cudaStream_t stream) {
  check_scale_arguments("cuda_scale_in_place", buf, count, dtype);
  if (count == 0) return;
  cudaGetLastError();
  dispatch_float(dtype, LaunchOnDevice{{buf, nullptr, nullptr, count, factor}, stream});
  throw_if_launch_failed("cuda_scale_in_place", count, dtype, "scale");
}

namespace detail {

void emulate_cuda_reduce_on_host(void* dst, const void* a, const void* b, size_t count,
                                 DataType dtype, ReduceOp op) {
  check_reduce_arguments("emulate_cuda_reduce_on_host", dst, a, b, count, dtype, op);
  dispatch(dtype, op, RunOnHost{{dst, a, b, count, 0.0}});
}

void emulate_cuda_scale_on_host(void* buf, size_t count, DataType dtype, double factor) {
  check_scale_arguments("emulate_cuda_scale_on_host", buf, count, dtype);
  dispatch_float(dtype, RunOnHost{{buf, nullptr, nullptr, count, factor}});
}

}  // namespace detail
}  // namespace ringd
