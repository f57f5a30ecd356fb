// Test inputs whose reductions are exact in every dtype (small integers), and a reference that
// computes the expected result with plain integer arithmetic, independent of ringd's kernels.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ringd/types.h"

namespace ringd::testing {

// IEEE binary16 / bfloat16 <-> float, written here independently of src/common (round to nearest
// even; inputs in tests are small integers, but the conversions are general).
inline float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  float magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  else if (exponent == 31)
    magnitude = mantissa ? NAN : INFINITY;
  else
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), static_cast<int>(exponent) - 25);
  return sign ? -magnitude : magnitude;
}
inline uint16_t float_to_half(float f) {
  // Search-free: scale into the half grid and round with nearbyint (ties to even).
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  float a = std::fabs(f);
  if (std::isnan(f)) return 0x7E00;
  if (a >= 65520.0f) return sign | 0x7C00;
  int exponent;
  std::frexp(a, &exponent);             // a = m * 2^exponent, m in [0.5, 1)
  int e = std::max(exponent - 1, -14);  // unbiased exponent of the result (subnormals at -14)
  const float step = std::ldexp(1.0f, e - 10);
  const float q = std::nearbyint(a / step);  // integer significand, maybe 2048 after rounding
  const uint32_t significand = static_cast<uint32_t>(q);
  if (significand == 0) return sign;
  if (significand >= 2048) {
    e += 1;
    return sign | static_cast<uint16_t>(((e + 15) << 10));
  }
  if (significand < 1024) return sign | static_cast<uint16_t>(significand);  // subnormal
  return sign | static_cast<uint16_t>(((e + 15) << 10) | (significand & 0x3FF));
}
inline float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  const uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline void store_value(void* buf, size_t i, DataType dtype, double v) {
  switch (dtype) {
    case DataType::kFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(buf)[i] = v; break;
    case DataType::kFloat16:
      static_cast<uint16_t*>(buf)[i] = float_to_half(static_cast<float>(v));
      break;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(buf)[i] = float_to_bf16(static_cast<float>(v));
      break;
    case DataType::kInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case DataType::kInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case DataType::kUInt8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
  }
}

inline double load_value(const void* buf, size_t i, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return static_cast<const float*>(buf)[i];
    case DataType::kFloat64: return static_cast<const double*>(buf)[i];
    case DataType::kFloat16: return half_to_float(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kInt32: return static_cast<const int32_t*>(buf)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DataType::kUInt8: return static_cast<const uint8_t*>(buf)[i];
  }
  return 0;
}

// Rank `rank`'s input at element i for `op`: 1..4 for sum/avg (a sum over 16 ranks stays <= 64,
// exact even in bfloat16 and uint8), 1 or 2 on ranks 0..5 for prod (product <= 8), 1..11 for
// min/max.
inline int64_t input_value(ReduceOp op, int rank, size_t i) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return 1 + static_cast<int64_t>((rank + i) % 4);
    case ReduceOp::kProd: return (rank < 6 && (rank + i) % 2 == 0) ? 2 : 1;
    case ReduceOp::kMin:
    case ReduceOp::kMax: return 1 + static_cast<int64_t>((rank * 7 + i * 3) % 11);
  }
  return 0;
}

// The exact result over ranks 0..size-1 (avg: the exact quotient; compare with a tolerance).
inline double expected_value(ReduceOp op, int size, size_t i) {
  int64_t acc = input_value(op, 0, i);
  for (int r = 1; r < size; ++r) {
    const int64_t v = input_value(op, r, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += v; break;
      case ReduceOp::kProd: acc *= v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
    }
  }
  return op == ReduceOp::kAvg ? static_cast<double>(acc) / size : static_cast<double>(acc);
}

inline std::vector<unsigned char> make_input(ReduceOp op, int rank, size_t count, DataType dtype) {
  std::vector<unsigned char> buf(count * dtype_size(dtype) + 1);
  for (size_t i = 0; i < count; ++i)
    store_value(buf.data(), i, dtype, static_cast<double>(input_value(op, rank, i)));
  return buf;
}

// Relative tolerance for avg (one rounding of the sum times a rounded 1/n): exact ops use 0.
inline double avg_tolerance(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return 2e-3;
    case DataType::kBFloat16: return 1.6e-2;
    case DataType::kFloat32: return 1e-6;
    default: return 1e-12;
  }
}

}  // namespace ringd::testing
