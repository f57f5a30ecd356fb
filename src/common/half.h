// Scalar conversions between f32 and the two 16-bit float formats, used by the portable reduce
// kernels and for the odd element outside a vector loop.
//
// Rounding rules (the same as x86 F16C, so the portable and AVX2 kernels agree bit for bit):
//   - widening (f16 -> f32, bf16 -> f32) is exact; f16 subnormals become f32 normals.
//   - narrowing rounds to nearest, ties to even, exactly once. Values at or beyond the halfway
//     point past the largest finite value become +-Inf (f16: |x| >= 65520). f16 results below
//     2^-14 become subnormals (gradual underflow), rounded the same way.
//   - NaN stays NaN: the sign and the top payload bits are kept and the quiet bit is set, so a NaN
//     whose payload lives only in the low 13 (f16) or 16 (bf16) bits cannot round to Inf.
// f16 <-> f32 conversion assumes the default floating-point environment (round to nearest, no
// flush-to-zero), which is what every ringd thread runs with.
#pragma once

#include <cstdint>
#include <cstring>

namespace ringd::half {

inline uint32_t f32_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float f32_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) {  // Inf, or NaN (quieted, as VCVTPH2PS does)
    return f32_from_bits(sign | 0x7F800000u | (mantissa << 13) | (mantissa ? 0x00400000u : 0));
  }
  if (exponent != 0) return f32_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in f32.
  return f32_from_bits(sign | f32_bits(static_cast<float>(mantissa) * 0x1p-24f));
}

inline uint16_t f32_to_f16(float value) {
  const uint32_t bits = f32_bits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) {  // NaN: keep the top payload bits, set the quiet bit
    return static_cast<uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  }
  if (magnitude >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520: Inf
  if (magnitude >= 0x38800000u) {  // f16 normal range, |x| >= 2^-14: rebias, round at bit 13
    const uint32_t rebiased = magnitude - (112u << 23);
    return static_cast<uint16_t>(sign | ((rebiased + 0xFFFu + ((rebiased >> 13) & 1)) >> 13));
  }
  // |x| < 2^-14: adding 0.5 (whose ulp is 2^-24, the f16 subnormal step) makes the FPU round the
  // value to a multiple of 2^-24, ties to even; the low mantissa bits are then the f16 bits. A
  // value that rounds up to 2^-14 yields 0x400, the smallest f16 normal, as it should.
  const float shifted = f32_from_bits(magnitude) + 0.5f;
  return static_cast<uint16_t>(sign | (f32_bits(shifted) - 0x3F000000u));
}

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float value) {
  const uint32_t bits = f32_bits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Round to nearest even at bit 16; a carry into the exponent (up to Inf) is the right answer.
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1)) >> 16);
}

}  // namespace ringd::half
