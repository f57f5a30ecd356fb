// The AVX2/F16C reduce kernels. Only this file is compiled for AVX2 (a target pragma below, not a
// global -mavx2), and reduce.cc calls into it only after cpu_has_avx2_kernels() said yes, so the
// library still runs on an x86-64 CPU without AVX2. Results equal the portable kernels in
// reduce.cc bit for bit (tests/common/reduce_test.cc checks); the semantics are described there.
//
// Shape: each kernel is a small struct whose compute() reads 32 bytes of each input (unaligned)
// and returns the 32 result bytes. run() stores them over the whole vectors and sends the last
// partial vector through the same compute() via zero-padded stack buffers, so a tail rounds
// exactly like the body.
//   f32/f64   one instruction per vector for sum/prod; min/max fix up +-0 and NaN (reduce.cc).
//   f16       VCVTPH2PS widens 8 halves, VCVTPS2PH rounds back to nearest even (imm = 0).
//   bf16      widening is a 16-bit shift or mask; narrowing adds 0x7FFF + lsb (ties to even) and
//             keeps a NaN a NaN by setting its quiet bit instead.
//   f16/bf16 min/max compare 16-bit keys (sign-magnitude turned two's complement) and return an
//             operand's own bits, so nothing is rounded.
// Large out-of-place calls store with non-temporal (streaming) stores: the destination is not
// read first, which saves a quarter of the memory traffic once the buffers no longer fit in cache.
#include "common/reduce_internal.h"

#if RINGD_REDUCE_HAVE_AVX2_KERNELS

#include <cpuid.h>
#include <immintrin.h>

#include <cstdint>
#include <cstring>

// Everything below is AVX2 code; all of it has internal linkage except the entry points, so no
// AVX2 copy of an inline function can be merged into the rest of the program.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,f16c,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,f16c,fma")
#endif

namespace ringd::detail {
namespace {

// Out-of-place results at least this large bypass the caches (three buffers of this size fill
// most of a server's last-level cache share).
constexpr size_t kStreamingStoreBytes = size_t{8} << 20;

template <bool kStream, class K, class T>
size_t run_vectors(const K& kernel, T* out, const T* x, const T* y, size_t i, size_t count) {
  constexpr size_t L = 32 / sizeof(T);
  auto store = [&](size_t at) {
    const __m256i v = kernel.compute(x + at, y + at);
    if constexpr (kStream)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(out + at), v);
    else
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + at), v);
  };
  for (; i + 4 * L <= count; i += 4 * L) store(i), store(i + L), store(i + 2 * L), store(i + 3 * L);
  for (; i + L <= count; i += L) store(i);
  return i;
}

// Fewer than one vector's worth of elements, through zero-padded buffers.
template <class K, class T>
void run_partial(const K& kernel, T* out, const T* x, const T* y, size_t n) {
  if (n == 0) return;
  alignas(32) T part_x[32 / sizeof(T)] = {}, part_y[32 / sizeof(T)] = {}, part_out[32 / sizeof(T)];
  std::memcpy(part_x, x, n * sizeof(T));
  std::memcpy(part_y, y, n * sizeof(T));
  _mm256_store_si256(reinterpret_cast<__m256i*>(part_out), kernel.compute(part_x, part_y));
  std::memcpy(out, part_out, n * sizeof(T));
}

template <class K>
void run(const K& kernel, void* dst, const void* a, const void* b, size_t count) {
  using T = typename K::Elem;
  T* out = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  size_t i = 0;
  const size_t misalign = reinterpret_cast<uintptr_t>(out) % 32;
  if (count * sizeof(T) >= kStreamingStoreBytes && dst != a && dst != b &&
      misalign % sizeof(T) == 0) {
    const size_t head = misalign ? (32 - misalign) / sizeof(T) : 0;  // until out is 32-aligned
    run_partial(kernel, out, x, y, head);
    i = run_vectors<true>(kernel, out, x, y, head, count);
    _mm_sfence();
  }
  i = run_vectors<false>(kernel, out, x, y, i, count);
  run_partial(kernel, out + i, x + i, y + i, count - i);
}

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// ---- f32 / f64 operators (the same rules as float_min/float_max in reduce.cc) ----------------
struct Add {
  __m256 operator()(__m256 x, __m256 y) const { return _mm256_add_ps(x, y); }
  __m256d operator()(__m256d x, __m256d y) const { return _mm256_add_pd(x, y); }
};
struct Mul {
  __m256 operator()(__m256 x, __m256 y) const { return _mm256_mul_ps(x, y); }
  __m256d operator()(__m256d x, __m256d y) const { return _mm256_mul_pd(x, y); }
};
// VMINPS returns its second operand when the inputs are equal or unordered; OR-ing x in then gives
// x|y there: -0 for +-0 and a NaN for NaN.
struct Min {
  __m256 operator()(__m256 x, __m256 y) const {
    return _mm256_or_ps(_mm256_min_ps(x, y), _mm256_and_ps(_mm256_cmp_ps(x, y, _CMP_EQ_UQ), x));
  }
  __m256d operator()(__m256d x, __m256d y) const {
    return _mm256_or_pd(_mm256_min_pd(x, y), _mm256_and_pd(_mm256_cmp_pd(x, y, _CMP_EQ_UQ), x));
  }
};
// VMAXPS returns y when equal or unordered: AND with x when equal (+0 for +-0), OR when unordered.
struct Max {
  __m256 operator()(__m256 x, __m256 y) const {
    const __m256 keep = _mm256_or_ps(x, _mm256_cmp_ps(x, y, _CMP_NEQ_UQ));
    return _mm256_or_ps(_mm256_and_ps(_mm256_max_ps(x, y), keep),
                        _mm256_and_ps(_mm256_cmp_ps(x, y, _CMP_UNORD_Q), x));
  }
  __m256d operator()(__m256d x, __m256d y) const {
    const __m256d keep = _mm256_or_pd(x, _mm256_cmp_pd(x, y, _CMP_NEQ_UQ));
    return _mm256_or_pd(_mm256_and_pd(_mm256_max_pd(x, y), keep),
                        _mm256_and_pd(_mm256_cmp_pd(x, y, _CMP_UNORD_Q), x));
  }
};
// scale_in_place reuses the binary kernels; Scale ignores its second operand.
struct Scale {
  float factor;
  __m256 operator()(__m256 x, __m256) const { return _mm256_mul_ps(x, _mm256_set1_ps(factor)); }
};
struct ScaleF64 {
  double factor;
  __m256d operator()(__m256d x, __m256d) const { return _mm256_mul_pd(x, _mm256_set1_pd(factor)); }
};

template <class Op>
struct F32Kernel {
  using Elem = float;
  Op op;
  __m256i compute(const float* x, const float* y) const {
    return _mm256_castps_si256(op(_mm256_loadu_ps(x), _mm256_loadu_ps(y)));
  }
};

template <class Op>
struct F64Kernel {
  using Elem = double;
  Op op;
  __m256i compute(const double* x, const double* y) const {
    return _mm256_castpd_si256(op(_mm256_loadu_pd(x), _mm256_loadu_pd(y)));
  }
};

// ---- f16 / bf16 --------------------------------------------------------------------------------
template <class Op>
struct F16Kernel {
  using Elem = uint16_t;
  Op op;
  __m128i half(const uint16_t* x, const uint16_t* y) const {
    const __m256 fx = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
    const __m256 fy = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y)));
    return _mm256_cvtps_ph(op(fx, fy), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  __m256i compute(const uint16_t* x, const uint16_t* y) const {
    return _mm256_set_m128i(half(x + 8, y + 8), half(x, y));
  }
};

// Rounds f32 to bf16 (see half::f32_to_bf16): adds 0x7FFF + lsb; the bf16 bits land in the upper
// half of each lane. NaN needs the quiet bit set instead of the increment (a carry could turn it
// into Inf or -0); NaN is rare, so the kernel checks for it once per 16 results and only then pays
// for fix_nan().
inline __m256i round_to_bf16(__m256 value) {
  const __m256i bits = _mm256_castps_si256(value);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  return _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFF)), lsb);
}
inline __m256i fix_nan(__m256 value, __m256i rounded) {
  const __m256i quiet_nan =
      _mm256_or_si256(_mm256_castps_si256(value), _mm256_set1_epi32(0x00400000));
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(value, value, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
}

// Each 32-bit lane holds two bf16: the even element widens by shifting it up 16 bits, the odd one
// (already in the upper half) by masking off the even one; the results recombine with one blend.
template <class Op>
struct BF16Kernel {
  using Elem = uint16_t;
  Op op;
  __m256i compute(const uint16_t* x, const uint16_t* y) const {
    const __m256i vx = load(x), vy = load(y),
                  upper = _mm256_set1_epi32(static_cast<int>(0xFFFF0000));
    const __m256 even = op(_mm256_castsi256_ps(_mm256_slli_epi32(vx, 16)),
                           _mm256_castsi256_ps(_mm256_slli_epi32(vy, 16)));
    const __m256 odd = op(_mm256_castsi256_ps(_mm256_and_si256(vx, upper)),
                          _mm256_castsi256_ps(_mm256_and_si256(vy, upper)));
    __m256i even_bits = round_to_bf16(even), odd_bits = round_to_bf16(odd);
    if (_mm256_movemask_ps(_mm256_cmp_ps(even, odd, _CMP_UNORD_Q)) != 0) [[unlikely]] {
      even_bits = fix_nan(even, even_bits);
      odd_bits = fix_nan(odd, odd_bits);
    }
    return _mm256_blend_epi16(_mm256_srli_epi32(even_bits, 16), odd_bits, 0xAA);
  }
};

// min/max on 16-bit float bits. key() maps sign-magnitude to a signed integer that orders like the
// float (with -0 < +0); NaN in either operand gives x|y.
template <bool kIsMax, uint16_t kInfBits>
struct HalfMinMaxKernel {
  using Elem = uint16_t;
  static __m256i key(__m256i v) {
    return _mm256_xor_si256(v,
                            _mm256_and_si256(_mm256_srai_epi16(v, 15), _mm256_set1_epi16(0x7FFF)));
  }
  static __m256i is_nan(__m256i v) {
    return _mm256_cmpgt_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x7FFF)),
                              _mm256_set1_epi16(static_cast<int16_t>(kInfBits)));
  }
  __m256i compute(const uint16_t* x, const uint16_t* y) const {
    const __m256i vx = load(x), vy = load(y);
    const __m256i take_x =
        kIsMax ? _mm256_cmpgt_epi16(key(vx), key(vy)) : _mm256_cmpgt_epi16(key(vy), key(vx));
    const __m256i picked = _mm256_blendv_epi8(vy, vx, take_x);
    const __m256i any_nan = _mm256_or_si256(is_nan(vx), is_nan(vy));
    return _mm256_blendv_epi8(picked, _mm256_or_si256(vx, vy), any_nan);
  }
};

// ---- integers: wrap-around sum/prod, signed min/max (unsigned for u8) --------------------------
template <ReduceOp kOp>
struct I32Kernel {
  using Elem = int32_t;
  __m256i compute(const int32_t* x, const int32_t* y) const {
    const __m256i vx = load(x), vy = load(y);
    if constexpr (kOp == ReduceOp::kProd) return _mm256_mullo_epi32(vx, vy);
    if constexpr (kOp == ReduceOp::kMin) return _mm256_min_epi32(vx, vy);
    if constexpr (kOp == ReduceOp::kMax) return _mm256_max_epi32(vx, vy);
    return _mm256_add_epi32(vx, vy);
  }
};

// AVX2 has no 64-bit multiply or min/max: the low 64 bits of x*y are lo*lo + ((lo*hi + hi*lo) <<
// 32).
template <ReduceOp kOp>
struct I64Kernel {
  using Elem = int64_t;
  __m256i compute(const int64_t* x, const int64_t* y) const {
    const __m256i vx = load(x), vy = load(y);
    if constexpr (kOp == ReduceOp::kProd) {
      const __m256i cross =
          _mm256_mullo_epi32(vx, _mm256_shuffle_epi32(vy, _MM_SHUFFLE(2, 3, 0, 1)));
      const __m256i cross_sum = _mm256_add_epi32(cross, _mm256_srli_epi64(cross, 32));
      return _mm256_add_epi64(_mm256_mul_epu32(vx, vy), _mm256_slli_epi64(cross_sum, 32));
    }
    if constexpr (kOp == ReduceOp::kMin)
      return _mm256_blendv_epi8(vx, vy, _mm256_cmpgt_epi64(vx, vy));
    if constexpr (kOp == ReduceOp::kMax)
      return _mm256_blendv_epi8(vy, vx, _mm256_cmpgt_epi64(vx, vy));
    return _mm256_add_epi64(vx, vy);
  }
};

// No 8-bit multiply either: multiply even and odd bytes as 16-bit lanes and keep the low bytes.
template <ReduceOp kOp>
struct U8Kernel {
  using Elem = uint8_t;
  __m256i compute(const uint8_t* x, const uint8_t* y) const {
    const __m256i vx = load(x), vy = load(y);
    if constexpr (kOp == ReduceOp::kProd) {
      const __m256i even = _mm256_and_si256(_mm256_mullo_epi16(vx, vy), _mm256_set1_epi16(0x00FF));
      const __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(vx, 8), _mm256_srli_epi16(vy, 8));
      return _mm256_or_si256(even, _mm256_slli_epi16(odd, 8));
    }
    if constexpr (kOp == ReduceOp::kMin) return _mm256_min_epu8(vx, vy);
    if constexpr (kOp == ReduceOp::kMax) return _mm256_max_epu8(vx, vy);
    return _mm256_add_epi8(vx, vy);
  }
};

// ---- dispatch: one instantiation (one tight loop) per dtype x op ------------------------------
template <template <class> class Kernel>
void run_float_op(ReduceOp op, void* dst, const void* a, const void* b, size_t count) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return run(Kernel<Add>{}, dst, a, b, count);
    case ReduceOp::kProd: return run(Kernel<Mul>{}, dst, a, b, count);
    case ReduceOp::kMin: return run(Kernel<Min>{}, dst, a, b, count);
    case ReduceOp::kMax: return run(Kernel<Max>{}, dst, a, b, count);
  }
}

template <uint16_t kInfBits, template <class> class Kernel>
void run_half_op(ReduceOp op, void* dst, const void* a, const void* b, size_t count) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return run(Kernel<Add>{}, dst, a, b, count);
    case ReduceOp::kProd: return run(Kernel<Mul>{}, dst, a, b, count);
    case ReduceOp::kMin: return run(HalfMinMaxKernel<false, kInfBits>{}, dst, a, b, count);
    case ReduceOp::kMax: return run(HalfMinMaxKernel<true, kInfBits>{}, dst, a, b, count);
  }
}

template <template <ReduceOp> class Kernel>
void run_int_op(ReduceOp op, void* dst, const void* a, const void* b, size_t count) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return run(Kernel<ReduceOp::kSum>{}, dst, a, b, count);
    case ReduceOp::kProd: return run(Kernel<ReduceOp::kProd>{}, dst, a, b, count);
    case ReduceOp::kMin: return run(Kernel<ReduceOp::kMin>{}, dst, a, b, count);
    case ReduceOp::kMax: return run(Kernel<ReduceOp::kMax>{}, dst, a, b, count);
  }
}

}  // namespace

bool cpu_has_avx2_kernels() {
  __builtin_cpu_init();
#if defined(__clang__)  // clang's __builtin_cpu_supports has no "f16c"; AVX2's OS check covers it
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
#else
  const bool f16c = __builtin_cpu_supports("f16c");
#endif
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
}

void reduce_into_avx2(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                      ReduceOp op) {
  switch (dtype) {
    case DataType::kFloat32: return run_float_op<F32Kernel>(op, dst, a, b, count);
    case DataType::kFloat64: return run_float_op<F64Kernel>(op, dst, a, b, count);
    case DataType::kFloat16: return run_half_op<0x7C00, F16Kernel>(op, dst, a, b, count);
    case DataType::kBFloat16: return run_half_op<0x7F80, BF16Kernel>(op, dst, a, b, count);
    case DataType::kInt32: return run_int_op<I32Kernel>(op, dst, a, b, count);
    case DataType::kInt64: return run_int_op<I64Kernel>(op, dst, a, b, count);
    case DataType::kUInt8: return run_int_op<U8Kernel>(op, dst, a, b, count);
  }
}

void scale_in_place_avx2(void* buf, size_t count, DataType dtype, double factor) {
  const float f32_factor = static_cast<float>(factor);
  switch (dtype) {
    case DataType::kFloat32: return run(F32Kernel<Scale>{{f32_factor}}, buf, buf, buf, count);
    case DataType::kFloat64: return run(F64Kernel<ScaleF64>{{factor}}, buf, buf, buf, count);
    case DataType::kFloat16: return run(F16Kernel<Scale>{{f32_factor}}, buf, buf, buf, count);
    case DataType::kBFloat16: return run(BF16Kernel<Scale>{{f32_factor}}, buf, buf, buf, count);
    default: return;  // integers are rejected by scale_in_place()
  }
}

}  // namespace ringd::detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // RINGD_REDUCE_HAVE_AVX2_KERNELS
