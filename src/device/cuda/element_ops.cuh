// What one element of a reduction or scale computes, for the CUDA kernels in reduce_kernels.cu.
// Everything here is __host__ __device__, so the same code also runs on the host (see
// detail::emulate_cuda_reduce_on_host) and is tested against common/reduce.cc on machines without
// a GPU. The rules are common/reduce.cc's, bit for bit:
//   sum, avg  a + b; f16/bf16 widen to f32, add, round once to nearest even; integers wrap around
//             (computed in an unsigned type).
//   prod      a * b, with the same rules.
//   min, max  an operand, unchanged. Floats: -0 orders below +0 (min(+0, -0) = -0 and
//             max(+0, -0) = +0 on either side), and a NaN operand gives the bitwise OR of both
//             operands, so the result is the same for (a, b) and (b, a).
//   scale     f32, f16, bf16: multiply in f32 by the factor rounded to f32 (then round to f16 or
//             bf16); f64: multiply in f64.
// Arithmetic is IEEE round-to-nearest with no fused multiply-add and no flush-to-zero: on the
// device through the __fadd_rn-style intrinsics, on the host through plain operators.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ringd/types.h"

#if defined(__CUDA_ARCH__)
#define RINGD_FADD(x, y) __fadd_rn(x, y)
#define RINGD_FMUL(x, y) __fmul_rn(x, y)
#define RINGD_DADD(x, y) __dadd_rn(x, y)
#define RINGD_DMUL(x, y) __dmul_rn(x, y)
#else
#define RINGD_FADD(x, y) ((x) + (y))
#define RINGD_FMUL(x, y) ((x) * (y))
#define RINGD_DADD(x, y) ((x) + (y))
#define RINGD_DMUL(x, y) ((x) * (y))
#endif

namespace ringd::cuda_ops {

template <typename Bits, typename T>
__host__ __device__ inline Bits bits_of(T value) {
  static_assert(sizeof(Bits) == sizeof(T));
  Bits bits;
  memcpy(static_cast<void*>(&bits), static_cast<const void*>(&value), sizeof bits);
  return bits;
}

template <typename T, typename Bits>
__host__ __device__ inline T from_bits(Bits bits) {
  static_assert(sizeof(Bits) == sizeof(T));
  T value;
  memcpy(static_cast<void*>(&value), static_cast<const void*>(&bits), sizeof value);
  return value;
}

// How an element is widened for arithmetic (Acc) and narrowed back.
template <typename T>
struct Element;

template <>
struct Element<float> {
  using Acc = float;
  using Bits = uint32_t;
  __host__ __device__ static Acc widen(float x) { return x; }
  __host__ __device__ static float narrow(Acc x) { return x; }
  __host__ __device__ static Acc add(Acc x, Acc y) { return RINGD_FADD(x, y); }
  __host__ __device__ static Acc mul(Acc x, Acc y) { return RINGD_FMUL(x, y); }
};

template <>
struct Element<double> {
  using Acc = double;
  using Bits = uint64_t;
  __host__ __device__ static Acc widen(double x) { return x; }
  __host__ __device__ static double narrow(Acc x) { return x; }
  __host__ __device__ static Acc add(Acc x, Acc y) { return RINGD_DADD(x, y); }
  __host__ __device__ static Acc mul(Acc x, Acc y) { return RINGD_DMUL(x, y); }
};

template <>
struct Element<__half> {
  using Acc = float;
  using Bits = uint16_t;
  __host__ __device__ static Acc widen(__half x) { return __half2float(x); }
  __host__ __device__ static __half narrow(Acc x) { return __float2half_rn(x); }
  __host__ __device__ static Acc add(Acc x, Acc y) { return RINGD_FADD(x, y); }
  __host__ __device__ static Acc mul(Acc x, Acc y) { return RINGD_FMUL(x, y); }
};

template <>
struct Element<__nv_bfloat16> {
  using Acc = float;
  using Bits = uint16_t;
  __host__ __device__ static Acc widen(__nv_bfloat16 x) { return __bfloat162float(x); }
  __host__ __device__ static __nv_bfloat16 narrow(Acc x) { return __float2bfloat16_rn(x); }
  __host__ __device__ static Acc add(Acc x, Acc y) { return RINGD_FADD(x, y); }
  __host__ __device__ static Acc mul(Acc x, Acc y) { return RINGD_FMUL(x, y); }
};

// Integers combine in the unsigned type Wide (at least 32 bits), so sum and prod wrap around.
template <typename T, typename Wide>
struct WrappingInteger {
  using Acc = T;
  __host__ __device__ static Acc widen(T x) { return x; }
  __host__ __device__ static T narrow(Acc x) { return x; }
  __host__ __device__ static Acc add(Acc x, Acc y) {
    return static_cast<T>(static_cast<Wide>(static_cast<Wide>(x) + static_cast<Wide>(y)));
  }
  __host__ __device__ static Acc mul(Acc x, Acc y) {
    return static_cast<T>(static_cast<Wide>(static_cast<Wide>(x) * static_cast<Wide>(y)));
  }
};

template <>
struct Element<int32_t> : WrappingInteger<int32_t, uint32_t> {};
template <>
struct Element<int64_t> : WrappingInteger<int64_t, uint64_t> {};
template <>
struct Element<uint8_t> : WrappingInteger<uint8_t, uint32_t> {};

template <typename T, ReduceOp kOp>
__host__ __device__ inline T combine(T a, T b) {
  using E = Element<T>;
  const typename E::Acc x = E::widen(a);
  const typename E::Acc y = E::widen(b);
  if constexpr (kOp == ReduceOp::kSum || kOp == ReduceOp::kAvg) {
    return E::narrow(E::add(x, y));
  } else if constexpr (kOp == ReduceOp::kProd) {
    return E::narrow(E::mul(x, y));
  } else if constexpr (std::is_integral_v<T>) {
    if constexpr (kOp == ReduceOp::kMin) {
      return y < x ? b : a;
    } else {
      return x < y ? b : a;
    }
  } else {
    if (x < y) return kOp == ReduceOp::kMin ? a : b;
    if (y < x) return kOp == ReduceOp::kMin ? b : a;
    using Bits = typename E::Bits;
    const Bits a_bits = bits_of<Bits>(a);
    const Bits b_bits = bits_of<Bits>(b);
    // Equal (x == y, so neither is NaN): max of +-0 is +0 (AND); otherwise OR (-0, or a NaN).
    const bool equal = x == y;
    return from_bits<T>(
        static_cast<Bits>(kOp == ReduceOp::kMax && equal ? (a_bits & b_bits) : (a_bits | b_bits)));
  }
}

template <typename T>
__host__ __device__ inline T scale(T x, double factor) {
  using E = Element<T>;
  if constexpr (std::is_same_v<T, double>) {
    return RINGD_DMUL(x, factor);
  } else {
    return E::narrow(RINGD_FMUL(E::widen(x), static_cast<float>(factor)));
  }
}

}  // namespace ringd::cuda_ops
