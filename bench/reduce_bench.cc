// Host reduce kernels against memcpy of the same destination bytes. bytes_per_second counts the
// bytes of dst written, so the GB/s columns compare directly: an out-of-place reduce moves 3 bytes
// (a, b in; dst out) for memcpy's 2 and so tops out near 2/3 of memcpy once buffers leave the
// caches. The label names the kernel family reduce_into() dispatched to.
//
//   build-kernels/bench/reduce_bench --benchmark_filter='float/|bfloat16/|half/|Memcpy'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/reduce.h"
#include "common/reduce_internal.h"

namespace ringd {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

// Page-aligned, every byte written once so the pages are mapped before timing. Elements hold 1.0
// (or 1), so sums never hit subnormals, Inf or NaN.
Buffer make_buffer(size_t bytes, DataType dtype) {
  Buffer buffer(static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)));
  uint64_t one = 1;
  switch (dtype) {
    case DataType::kFloat32: one = 0x3F800000; break;
    case DataType::kFloat64: one = 0x3FF0000000000000; break;
    case DataType::kFloat16: one = 0x3C00; break;
    case DataType::kBFloat16: one = 0x3F80; break;
    default: break;
  }
  const size_t size = dtype_size(dtype);
  for (size_t offset = 0; offset + size <= bytes; offset += size) {
    std::memcpy(buffer.get() + offset, &one, size);
  }
  return buffer;
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t, DataType, ReduceOp);

void reduce_sum(benchmark::State& state, DataType dtype, ReduceFn reduce, bool in_place) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / dtype_size(dtype);
  Buffer a = make_buffer(bytes, dtype), b = make_buffer(bytes, dtype),
         dst = make_buffer(bytes, dtype);
  void* out = in_place ? a.get() : dst.get();
  for (auto _ : state) {
    reduce(out, a.get(), b.get(), count, dtype, ReduceOp::kSum);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  state.SetLabel(reduce == reduce_into ? reduce_kernel_isa() : "portable");
}

void BM_ReduceSum(benchmark::State& state, DataType dtype) {
  reduce_sum(state, dtype, reduce_into, false);
}
void BM_ReduceSumInPlace(benchmark::State& state, DataType dtype) {
  reduce_sum(state, dtype, reduce_into, true);
}
void BM_ReduceSumPortable(benchmark::State& state, DataType dtype) {
  reduce_sum(state, dtype, detail::reduce_into_portable, false);
}

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Buffer src = make_buffer(bytes, DataType::kUInt8), dst = make_buffer(bytes, DataType::kUInt8);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

void sizes(benchmark::internal::Benchmark* bench) {
  for (int64_t bytes :
       {int64_t{64} << 10, int64_t{1} << 20, int64_t{16} << 20, int64_t{64} << 20}) {
    bench->Arg(bytes);
  }
}

BENCHMARK(BM_Memcpy)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, float, DataType::kFloat32)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, bfloat16, DataType::kBFloat16)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, half, DataType::kFloat16)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, double, DataType::kFloat64)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, int32, DataType::kInt32)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceSumInPlace, float, DataType::kFloat32)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceSumInPlace, bfloat16, DataType::kBFloat16)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceSumPortable, float, DataType::kFloat32)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceSumPortable, bfloat16, DataType::kBFloat16)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceSumPortable, half, DataType::kFloat16)->Apply(sizes);

}  // namespace
}  // namespace ringd

BENCHMARK_MAIN();
