// reduce_into() / scale_in_place(): argument checks, the once-per-process choice of kernel family,
// and the portable kernels (plain loops) that the AVX2 kernels in reduce_avx2.cc must match bit for
// bit.
//
// Semantics shared by both families (see also half.h for the f16/bf16 rounding rules):
//   sum, avg  a + b. Floats: IEEE addition; f16/bf16 widen to f32, add, round once to nearest even
//             (f32 has more than 2p+2 bits for both formats, so this equals the correctly rounded
//             sum). Integers wrap around (computed in the unsigned type).
//   prod      a * b, with the same rules (an f16 or bf16 product is exact in f32 before rounding).
//   min, max  the smaller / larger operand, returned unchanged (no rounding). -0 orders below +0,
//             so min(+0, -0) = -0 and max(+0, -0) = +0 whichever side each is on. If either
//             operand is NaN the result is the bitwise OR of the two operands, which is a NaN and
//             is the same for (a, b) and (b, a). Hence min/max are bitwise commutative always.
//   NaN from sum/prod is a NaN; which operand's payload it carries is not specified (compilers may
//   swap the operands of a commutative instruction).
#include "common/reduce.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>

#include "common/half.h"
#include "common/reduce_internal.h"
#include "ringd/error.h"

namespace ringd {
namespace detail {
namespace {

template <class T, class Combine>
void combine_loop(void* dst, const void* a, const void* b, size_t count, Combine combine) {
  T* out = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < count; ++i) out[i] = combine(x[i], y[i]);
}

template <class T>
using BitsOf = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

template <class T>
T float_min(T x, T y) {
  if (x < y) return x;
  if (y < x) return y;
  return std::bit_cast<T>(std::bit_cast<BitsOf<T>>(x) | std::bit_cast<BitsOf<T>>(y));
}

template <class T>
T float_max(T x, T y) {
  if (x > y) return x;
  if (y > x) return y;
  const BitsOf<T> xb = std::bit_cast<BitsOf<T>>(x), yb = std::bit_cast<BitsOf<T>>(y);
  return std::bit_cast<T>(x == y ? (xb & yb) : (xb | yb));  // +-0 -> +0; NaN -> OR
}

template <class T>
void reduce_float(void* dst, const void* a, const void* b, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return combine_loop<T>(dst, a, b, count, [](T x, T y) { return x + y; });
    case ReduceOp::kProd: return combine_loop<T>(dst, a, b, count, [](T x, T y) { return x * y; });
    case ReduceOp::kMin: return combine_loop<T>(dst, a, b, count, float_min<T>);
    case ReduceOp::kMax: return combine_loop<T>(dst, a, b, count, float_max<T>);
  }
}

// f16 and bf16: Widen/Narrow are the half.h conversions of one format.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void reduce_half(void* dst, const void* a, const void* b, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return combine_loop<uint16_t>(
          dst, a, b, count, [](uint16_t x, uint16_t y) { return Narrow(Widen(x) + Widen(y)); });
    case ReduceOp::kProd:
      return combine_loop<uint16_t>(
          dst, a, b, count, [](uint16_t x, uint16_t y) { return Narrow(Widen(x) * Widen(y)); });
    case ReduceOp::kMin:  // compare widened, return an operand's own bits (as float_min does)
      return combine_loop<uint16_t>(dst, a, b, count, [](uint16_t x, uint16_t y) -> uint16_t {
        const float fx = Widen(x), fy = Widen(y);
        return fx < fy ? x : fy < fx ? y : static_cast<uint16_t>(x | y);
      });
    case ReduceOp::kMax:
      return combine_loop<uint16_t>(dst, a, b, count, [](uint16_t x, uint16_t y) -> uint16_t {
        const float fx = Widen(x), fy = Widen(y);
        if (fx > fy) return x;
        if (fy > fx) return y;
        return static_cast<uint16_t>(fx == fy ? (x & y) : (x | y));
      });
  }
}

template <class T>
void reduce_int(void* dst, const void* a, const void* b, size_t count, ReduceOp op) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:  // rejected by the caller for integers; combines as sum if it gets here
      return combine_loop<T>(dst, a, b, count, [](T x, T y) {
        return static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
      });
    case ReduceOp::kProd:
      return combine_loop<T>(dst, a, b, count, [](T x, T y) {
        return static_cast<T>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)));
      });
    case ReduceOp::kMin:
      return combine_loop<T>(dst, a, b, count, [](T x, T y) { return std::min(x, y); });
    case ReduceOp::kMax:
      return combine_loop<T>(dst, a, b, count, [](T x, T y) { return std::max(x, y); });
  }
}

template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void scale_half(void* buf, size_t count, float factor) {
  uint16_t* p = static_cast<uint16_t*>(buf);
  for (size_t i = 0; i < count; ++i) p[i] = Narrow(Widen(p[i]) * factor);
}

}  // namespace

void reduce_into_portable(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                          ReduceOp op) {
  switch (dtype) {
    case DataType::kFloat32: return reduce_float<float>(dst, a, b, count, op);
    case DataType::kFloat64: return reduce_float<double>(dst, a, b, count, op);
    case DataType::kFloat16:
      return reduce_half<half::f16_to_f32, half::f32_to_f16>(dst, a, b, count, op);
    case DataType::kBFloat16:
      return reduce_half<half::bf16_to_f32, half::f32_to_bf16>(dst, a, b, count, op);
    case DataType::kInt32: return reduce_int<int32_t>(dst, a, b, count, op);
    case DataType::kInt64: return reduce_int<int64_t>(dst, a, b, count, op);
    case DataType::kUInt8: return reduce_int<uint8_t>(dst, a, b, count, op);
  }
}

void scale_in_place_portable(void* buf, size_t count, DataType dtype, double factor) {
  switch (dtype) {
    case DataType::kFloat32: {
      float* p = static_cast<float*>(buf);
      const float f = static_cast<float>(factor);
      for (size_t i = 0; i < count; ++i) p[i] *= f;
      return;
    }
    case DataType::kFloat64: {
      double* p = static_cast<double*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] *= factor;
      return;
    }
    case DataType::kFloat16:
      return scale_half<half::f16_to_f32, half::f32_to_f16>(buf, count, static_cast<float>(factor));
    case DataType::kBFloat16:
      return scale_half<half::bf16_to_f32, half::f32_to_bf16>(buf, count,
                                                              static_cast<float>(factor));
    default: return;  // integers are rejected by scale_in_place()
  }
}

}  // namespace detail

namespace {

struct KernelFamily {
  decltype(&detail::reduce_into_portable) reduce;
  decltype(&detail::scale_in_place_portable) scale;
  const char* isa;
};

// Chosen on first use; the CPU does not change under a running process.
const KernelFamily& kernel_family() {
  static const KernelFamily family = [] {
#if RINGD_REDUCE_HAVE_AVX2_KERNELS
    if (detail::cpu_has_avx2_kernels()) {
      return KernelFamily{&detail::reduce_into_avx2, &detail::scale_in_place_avx2, "avx2+f16c"};
    }
#endif
    return KernelFamily{&detail::reduce_into_portable, &detail::scale_in_place_portable,
                        "portable"};
  }();
  return family;
}

void check_dtype(DataType dtype, const char* what) {
  RINGD_CHECK_ARG(dtype_size(dtype) != 0,
                  what << ": unknown data type code " << static_cast<int>(dtype)
                       << "; valid: float double half bfloat16 int32 int64 uint8");
}

}  // namespace

void reduce_into(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                 ReduceOp op) {
  check_dtype(dtype, "reduce_into");
  RINGD_CHECK_ARG(static_cast<int>(op) <= static_cast<int>(ReduceOp::kProd),
                  "reduce_into: unknown reduce op code " << static_cast<int>(op)
                                                         << "; valid: sum avg min max prod");
  RINGD_CHECK_ARG(reduce_op_supported(dtype, op),
                  "reduce op " << reduce_op_name(op) << " is not defined for " << dtype_name(dtype)
                               << " data; avg needs a floating-point type (use sum, then divide)");
  if (count == 0) return;
  RINGD_CHECK_ARG(dst && a && b, "reduce_into: null buffer for "
                                     << count << " " << dtype_name(dtype) << " elements");
  kernel_family().reduce(dst, a, b, count, dtype, op);
}

void scale_in_place(void* buf, size_t count, DataType dtype, double factor) {
  check_dtype(dtype, "scale_in_place");
  RINGD_CHECK_ARG(dtype_is_float(dtype),
                  "scale_in_place: " << dtype_name(dtype)
                                     << " is not a floating-point type (scaling finishes "
                                        "avg, which is defined for float types only)");
  if (count == 0) return;
  RINGD_CHECK_ARG(
      buf, "scale_in_place: null buffer for " << count << " " << dtype_name(dtype) << " elements");
  kernel_family().scale(buf, count, dtype, factor);
}

const char* reduce_kernel_isa() { return kernel_family().isa; }

}  // namespace ringd
