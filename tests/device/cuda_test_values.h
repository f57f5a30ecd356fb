// Inputs and comparisons shared by the CUDA kernel tests (CUDA builds only): random and special
// element bit patterns per dtype, closed-form values, and an element-by-element comparison whose
// failure message shows the offending element and its inputs in hex.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ringd/types.h"

namespace ringd::testing_cuda {

// Random element bits that are finite and non-zero, with magnitudes small enough that sums and
// products stay finite; integers take any bits, so their sums and products wrap around.
inline std::vector<uint8_t> random_elements(DataType dtype, size_t count, uint32_t seed) {
  std::mt19937_64 random(seed);
  const size_t element_bytes = dtype_size(dtype);
  std::vector<uint8_t> bytes(count * element_bytes);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t bits = random();
    const uint64_t sign = bits >> 63;
    uint64_t value = bits;
    switch (dtype) {
      case DataType::kFloat32:  // exponent field 0..167: |x| < 2^41
        value = sign << 31 | (bits % 168) << 23 | ((bits >> 8) & 0x7FFFFF) | 1;
        break;
      case DataType::kFloat64:  // exponent field 0..1123: |x| < 2^101
        value = sign << 63 | (bits % 1124) << 52 | ((bits >> 11) & 0xFFFFFFFFFFFFF) | 1;
        break;
      case DataType::kFloat16:  // exponent field 0..21: |x| < 128, so |a*b| < 16384
        value = sign << 15 | (bits % 22) << 10 | ((bits >> 8) & 0x3FF) | 1;
        break;
      case DataType::kBFloat16:  // exponent field 0..167
        value = sign << 15 | (bits % 168) << 7 | ((bits >> 8) & 0x7F) | 1;
        break;
      default: break;
    }
    std::memcpy(bytes.data() + i * element_bytes, &value, element_bytes);  // little-endian
  }
  return bytes;
}

// Bit patterns of +-0, +-Inf, quiet/signalling/negative NaNs with payloads, +-smallest
// subnormal, +-1 and the largest finite value; for integers the extremes where sums and products
// wrap around.
inline std::vector<uint64_t> special_values(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return {0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
              0x7FA00000, 0x00000001, 0x80000001, 0x3F800000, 0xBF800000, 0x7F7FFFFF};
    case DataType::kFloat64:
      return {0x0000000000000000, 0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000,
              0x7FF8000000000000, 0xFFF8000000000001, 0x7FF0000000000001, 0x7FF4000000000000,
              0x0000000000000001, 0x8000000000000001, 0x3FF0000000000000, 0xBFF0000000000000,
              0x7FEFFFFFFFFFFFFF};
    case DataType::kFloat16:
      return {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01,
              0x7D00, 0x0001, 0x8001, 0x3C00, 0xBC00, 0x7BFF};
    case DataType::kBFloat16:
      return {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81,
              0x7FA0, 0x0001, 0x8001, 0x3F80, 0xBF80, 0x7F7F};
    case DataType::kInt32:  // 0, 1, -1, max, min, min + 1
      return {0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x80000001};
    case DataType::kInt64:
      return {0, 1, 0xFFFFFFFFFFFFFFFF, 0x7FFFFFFFFFFFFFFF, 0x8000000000000000, 0x8000000000000001};
    case DataType::kUInt8: return {0, 1, 2, 127, 128, 255};
  }
  return {};
}

// Every ordered pair of special values, as two input arrays.
inline std::pair<std::vector<uint8_t>, std::vector<uint8_t>> special_pairs(DataType dtype) {
  const size_t element_bytes = dtype_size(dtype);
  std::pair<std::vector<uint8_t>, std::vector<uint8_t>> inputs;
  for (uint64_t x : special_values(dtype)) {
    for (uint64_t y : special_values(dtype)) {
      const auto* xb = reinterpret_cast<const uint8_t*>(&x);
      const auto* yb = reinterpret_cast<const uint8_t*>(&y);
      inputs.first.insert(inputs.first.end(), xb, xb + element_bytes);
      inputs.second.insert(inputs.second.end(), yb, yb + element_bytes);
    }
  }
  return inputs;
}

inline bool is_nan(DataType dtype, const uint8_t* element) {
  uint64_t bits = 0;
  std::memcpy(&bits, element, dtype_size(dtype));
  switch (dtype) {
    case DataType::kFloat32: return (bits & 0x7FFFFFFF) > 0x7F800000;
    case DataType::kFloat64: return (bits & 0x7FFFFFFFFFFFFFFF) > 0x7FF0000000000000;
    case DataType::kFloat16: return (bits & 0x7FFF) > 0x7C00;
    case DataType::kBFloat16: return (bits & 0x7FFF) > 0x7F80;
    default: return false;
  }
}

inline std::string hex(const uint8_t* element, size_t bytes) {
  static const char kDigits[] = "0123456789ABCDEF";
  std::string text = "0x";
  for (size_t i = bytes; i-- > 0;) {  // most significant byte first
    text += kDigits[element[i] >> 4];
    text += kDigits[element[i] & 0xF];
  }
  return text;
}

// `actual` must equal `expected` bit for bit, except that any NaN matches any NaN when
// `any_nan_matches` (sum and prod do not specify a NaN's payload). Reports the first difference.
inline void expect_same_elements(DataType dtype, ReduceOp op, const std::vector<uint8_t>& a,
                                 const std::vector<uint8_t>& b, const std::vector<uint8_t>& actual,
                                 const std::vector<uint8_t>& expected, bool any_nan_matches) {
  const size_t element_bytes = dtype_size(dtype);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i * element_bytes < actual.size(); ++i) {
    const uint8_t* got = actual.data() + i * element_bytes;
    const uint8_t* want = expected.data() + i * element_bytes;
    if (std::memcmp(got, want, element_bytes) == 0) continue;
    if (any_nan_matches && is_nan(dtype, got) && is_nan(dtype, want)) continue;
    FAIL() << dtype_name(dtype) << " " << reduce_op_name(op) << ": element " << i << " is "
           << hex(got, element_bytes) << ", expected " << hex(want, element_bytes) << " (inputs "
           << hex(a.data() + i * element_bytes, element_bytes) << ", "
           << hex(b.data() + i * element_bytes, element_bytes) << ")";
  }
}

// a[i] = i % 50 + 1 and b[i] = 2 are exact in every dtype, and so are their sum, product, min and
// max (positive integers up to 102): expected values in closed form, encoded here by hand,
// independent of the CPU kernels and of CUDA's conversions. Returns {a, b, expected}.
inline std::tuple<std::vector<uint8_t>, std::vector<uint8_t>, std::vector<uint8_t>>
closed_form_case(DataType dtype, ReduceOp op, size_t count) {
  const size_t element_bytes = dtype_size(dtype);
  auto store = [&](double value, std::vector<uint8_t>& out, size_t i) {
    uint8_t* at = out.data() + i * element_bytes;
    switch (dtype) {
      case DataType::kFloat32: {
        const float v = static_cast<float>(value);
        std::memcpy(at, &v, 4);
        break;
      }
      case DataType::kFloat64: std::memcpy(at, &value, 8); break;
      case DataType::kFloat16: {  // 2^e * 1.mantissa, written out
        const auto n = static_cast<uint32_t>(value);
        const int e = 31 - __builtin_clz(n);
        const auto v = static_cast<uint16_t>((e + 15) << 10 | ((n << (10 - e)) & 0x3FF));
        std::memcpy(at, &v, 2);
        break;
      }
      case DataType::kBFloat16: {  // the top half of the f32 (exact: at most 8 significant bits)
        const float f = static_cast<float>(value);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        const auto v = static_cast<uint16_t>(bits >> 16);
        std::memcpy(at, &v, 2);
        break;
      }
      case DataType::kInt32: {
        const int32_t v = static_cast<int32_t>(value);
        std::memcpy(at, &v, 4);
        break;
      }
      case DataType::kInt64: {
        const int64_t v = static_cast<int64_t>(value);
        std::memcpy(at, &v, 8);
        break;
      }
      case DataType::kUInt8: {
        const uint8_t v = static_cast<uint8_t>(value);
        std::memcpy(at, &v, 1);
        break;
      }
    }
  };
  std::vector<uint8_t> a(count * element_bytes), b(a.size()), expected(a.size());
  for (size_t i = 0; i < count; ++i) {
    const double x = static_cast<double>(i % 50 + 1);
    const double y = 2;
    double result = x + y;  // sum, and avg (which combines as sum)
    if (op == ReduceOp::kProd) result = x * y;
    if (op == ReduceOp::kMin) result = x < y ? x : y;
    if (op == ReduceOp::kMax) result = x < y ? y : x;
    store(x, a, i);
    store(y, b, i);
    store(result, expected, i);
  }
  return {a, b, expected};
}

// Every (dtype, op) pair that reduce_op_supported() accepts, and a readable test name for each.
inline std::vector<std::tuple<DataType, ReduceOp>> supported_pairs() {
  std::vector<std::tuple<DataType, ReduceOp>> pairs;
  for (DataType dtype : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (reduce_op_supported(dtype, op)) pairs.emplace_back(dtype, op);
    }
  }
  return pairs;
}

inline std::string pair_name(const testing::TestParamInfo<std::tuple<DataType, ReduceOp>>& info) {
  return std::string(dtype_name(std::get<0>(info.param))) + "_" +
         reduce_op_name(std::get<1>(info.param));
}

}  // namespace ringd::testing_cuda
