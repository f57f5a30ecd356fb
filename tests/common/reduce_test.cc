// reduce_into / scale_in_place against a scalar reference written here, independently of the
// kernels: f16/bf16 are decoded with ldexp and rounded with nearbyint (not half.h), sums and
// products are formed in double and rounded once. Every dtype x op x count x aliasing, through the
// dispatched kernels and through the portable ones; the AVX2 and portable families bit for bit.
#include "common/reduce.h"

#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "common/reduce_internal.h"
#include "ringd/error.h"

namespace ringd {
namespace {

// ---- independent 16-bit float model ------------------------------------------------------------
struct HalfFormat {
  int mantissa_bits, min_exp, max_exp, bias;
  uint16_t inf_bits, nan_bits;
};
constexpr HalfFormat kF16{10, -14, 15, 15, 0x7C00, 0x7E00};
constexpr HalfFormat kBF16{7, -126, 127, 127, 0x7F80, 0x7FC0};

double half_value(uint16_t h, const HalfFormat& f) {
  const int exponent = (h & 0x7FFF) >> f.mantissa_bits;
  const int mantissa = h & ((1 << f.mantissa_bits) - 1);
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == (f.inf_bits >> f.mantissa_bits)) return mantissa ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, f.min_exp - f.mantissa_bits);
  return sign * std::ldexp(mantissa + (1 << f.mantissa_bits), exponent - f.bias - f.mantissa_bits);
}

// Nearest representable value, ties to even (nearbyint in the default rounding mode).
uint16_t round_half(double x, const HalfFormat& f) {
  if (std::isnan(x)) return f.nan_bits;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double magnitude = std::fabs(x);
  if (std::isinf(x)) return sign | f.inf_bits;
  if (magnitude == 0) return sign;
  int exp2 = 0;
  std::frexp(magnitude, &exp2);
  int e = std::max(exp2 - 1, f.min_exp);
  double q = std::nearbyint(std::ldexp(magnitude, f.mantissa_bits - e));
  if (q >= std::ldexp(1.0, f.mantissa_bits + 1)) q /= 2, ++e;
  if (e > f.max_exp) return sign | f.inf_bits;
  const int implicit = 1 << f.mantissa_bits;
  const int bits = q < implicit
                       ? static_cast<int>(q)
                       : ((e + f.bias) << f.mantissa_bits) | (static_cast<int>(q) - implicit);
  return static_cast<uint16_t>(sign | bits);
}

// ---- reference -----------------------------------------------------------------------------
double float_value(DataType t, uint64_t bits) {
  switch (t) {
    case DataType::kFloat32: return std::bit_cast<float>(static_cast<uint32_t>(bits));
    case DataType::kFloat64: return std::bit_cast<double>(bits);
    case DataType::kFloat16: return half_value(static_cast<uint16_t>(bits), kF16);
    default: return half_value(static_cast<uint16_t>(bits), kBF16);
  }
}
uint64_t float_bits(DataType t, double v) {
  switch (t) {
    case DataType::kFloat32: return std::bit_cast<uint32_t>(static_cast<float>(v));
    case DataType::kFloat64: return std::bit_cast<uint64_t>(v);
    case DataType::kFloat16: return round_half(v, kF16);
    default: return round_half(v, kBF16);
  }
}

struct Expected {
  uint64_t bits;
  bool any_nan;  // sum/prod gave NaN: any NaN will do (the payload is unspecified)
};

Expected reference(DataType t, ReduceOp op, uint64_t a, uint64_t b) {
  const uint64_t mask = dtype_size(t) == 8 ? ~0ull : (1ull << (8 * dtype_size(t))) - 1;
  if (!dtype_is_float(t)) {  // wrap-around in 64-bit unsigned, then truncate
    const bool is_signed = t != DataType::kUInt8;
    const int shift = 64 - 8 * static_cast<int>(dtype_size(t));
    auto value = [&](uint64_t x) {  // sign-extend
      return is_signed ? static_cast<int64_t>(x << shift) >> shift : static_cast<int64_t>(x);
    };
    const int64_t x = value(a), y = value(b);
    switch (op) {
      case ReduceOp::kMin: return {static_cast<uint64_t>(std::min(x, y)) & mask, false};
      case ReduceOp::kMax: return {static_cast<uint64_t>(std::max(x, y)) & mask, false};
      case ReduceOp::kProd:
        return {(static_cast<uint64_t>(x) * static_cast<uint64_t>(y)) & mask, false};
      default: return {(static_cast<uint64_t>(x) + static_cast<uint64_t>(y)) & mask, false};
    }
  }
  const double x = float_value(t, a), y = float_value(t, b);
  if (op == ReduceOp::kMin || op == ReduceOp::kMax) {
    // Documented rule: NaN in -> a|b; otherwise the smaller/larger, -0 below +0.
    if (std::isnan(x) || std::isnan(y)) return {a | b, false};
    const bool is_min = op == ReduceOp::kMin;
    if (x != y) return {(x < y) == is_min ? a : b, false};
    return {std::signbit(x) == is_min ? a : b, false};
  }
  const double r = op == ReduceOp::kProd ? x * y : x + y;
  return {float_bits(t, r), std::isnan(r)};
}

// ---- data ----------------------------------------------------------------------------------
uint64_t random_element(DataType t, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 3.0);
  const uint64_t raw = rng();
  if (!dtype_is_float(t)) return raw;
  if (raw % 8 == 0) return raw >> 8;  // any bit pattern: subnormals, Inf, NaN, huge, tiny
  return float_bits(t, normal(rng));
}

uint64_t get(const std::vector<uint8_t>& buf, size_t i, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, buf.data() + i * size, size);
  return v;
}
void put(std::vector<uint8_t>& buf, size_t i, size_t size, uint64_t v) {
  std::memcpy(buf.data() + i * size, &v, size);
}

using ReduceFn = std::function<void(void*, const void*, const void*, size_t, DataType, ReduceOp)>;
enum class Alias { kSeparate, kDstIsA, kDstIsB };
constexpr size_t kGuard = 5;  // elements past count that must stay untouched

// Runs fn on a and b (count elements) with the given aliasing; returns dst (count + kGuard).
std::vector<uint8_t> run_reduce(const ReduceFn& fn, const std::vector<uint8_t>& a,
                                const std::vector<uint8_t>& b, size_t count, DataType t,
                                ReduceOp op, Alias alias) {
  const size_t size = dtype_size(t);
  std::vector<uint8_t> dst = alias == Alias::kDstIsA ? a : alias == Alias::kDstIsB ? b : a;
  if (alias == Alias::kSeparate) std::fill(dst.begin(), dst.end(), 0xA5);
  dst.resize((count + kGuard) * size, 0x5A);
  fn(dst.data(), alias == Alias::kDstIsA ? dst.data() : a.data(),
     alias == Alias::kDstIsB ? dst.data() : b.data(), count, t, op);
  return dst;
}

std::string describe(DataType t, ReduceOp op, size_t count, size_t i, uint64_t a, uint64_t b) {
  char text[160];
  std::snprintf(text, sizeof text, "%s %s count=%zu i=%zu a=%#llx b=%#llx", dtype_name(t),
                reduce_op_name(op), count, i, static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return text;
}

void expect_matches_reference(const ReduceFn& fn, DataType t, ReduceOp op, size_t count,
                              Alias alias, std::mt19937_64& rng) {
  const size_t size = dtype_size(t);
  std::vector<uint8_t> a(count * size), b(count * size);
  for (size_t i = 0; i < count; ++i) put(a, i, size, random_element(t, rng));
  for (size_t i = 0; i < count; ++i) put(b, i, size, random_element(t, rng));
  const std::vector<uint8_t> dst = run_reduce(fn, a, b, count, t, op, alias);
  for (size_t i = 0; i < count; ++i) {
    const Expected want = reference(t, op, get(a, i, size), get(b, i, size));
    const uint64_t got = get(dst, i, size);
    if (want.any_nan) {
      ASSERT_TRUE(std::isnan(float_value(t, got)))
          << describe(t, op, count, i, get(a, i, size), get(b, i, size));
    } else {
      ASSERT_EQ(got, want.bits) << describe(t, op, count, i, get(a, i, size), get(b, i, size));
    }
  }
  for (size_t i = count * size; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0x5A) << "wrote past count";
}

const size_t kCounts[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 1000, 4099};

std::string param_name(const ::testing::TestParamInfo<std::tuple<DataType, ReduceOp>>& info) {
  return std::string(dtype_name(std::get<0>(info.param))) + "_" +
         reduce_op_name(std::get<1>(info.param));
}
const ReduceFn kFamilies[] = {reduce_into, detail::reduce_into_portable};

class ReduceGrid : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {};

TEST_P(ReduceGrid, MatchesScalarReference) {
  const auto [t, op] = GetParam();
  if (!reduce_op_supported(t, op)) {  // avg on an integer type
    try {
      int32_t x = 1;
      reduce_into(&x, &x, &x, 1, t, op);
      FAIL() << "avg on " << dtype_name(t) << " did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(dtype_name(t)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("avg"), std::string::npos) << e.what();
    }
    return;
  }
  std::mt19937_64 rng(1234);
  for (const ReduceFn& fn : kFamilies) {
    for (size_t count : kCounts) {
      for (Alias alias : {Alias::kSeparate, Alias::kDstIsA, Alias::kDstIsB}) {
        SCOPED_TRACE(testing::Message()
                     << "count " << count << " alias " << static_cast<int>(alias));
        expect_matches_reference(fn, t, op, count, alias, rng);
        if (HasFatalFailure()) return;
      }
    }
  }
}

#if RINGD_REDUCE_HAVE_AVX2_KERNELS
TEST_P(ReduceGrid, Avx2AgreesWithPortableBitwise) {
  const auto [t, op] = GetParam();
  if (!detail::cpu_has_avx2_kernels()) GTEST_SKIP() << "CPU has no AVX2/F16C";
  if (!reduce_op_supported(t, op)) return;
  std::mt19937_64 rng(77);
  const size_t size = dtype_size(t);
  for (size_t count : {size_t{1}, size_t{63}, size_t{4099}, size_t{100003}}) {
    std::vector<uint8_t> a(count * size), b(count * size);
    for (size_t i = 0; i < count; ++i) put(a, i, size, random_element(t, rng));
    for (size_t i = 0; i < count; ++i) put(b, i, size, random_element(t, rng));
    const auto fast = run_reduce(detail::reduce_into_avx2, a, b, count, t, op, Alias::kSeparate);
    const auto slow =
        run_reduce(detail::reduce_into_portable, a, b, count, t, op, Alias::kSeparate);
    for (size_t i = 0; i < count; ++i) {
      const uint64_t x = get(fast, i, size), y = get(slow, i, size);
      // NaN payloads of sum/prod are unspecified (reduce.cc); everything else must match exactly.
      const bool both_nan =
          dtype_is_float(t) && std::isnan(float_value(t, x)) && std::isnan(float_value(t, y));
      if (op == ReduceOp::kMin || op == ReduceOp::kMax || !both_nan) {
        ASSERT_EQ(x, y) << describe(t, op, count, i, get(a, i, size), get(b, i, size));
      }
    }
  }
}

// Out-of-place results of 8 MiB and more take the streaming-store path, which first steps dst up
// to a 32-byte boundary: check it with a dst that starts one element past an aligned address.
TEST(ReduceLarge, StreamingStoresMatchPortable) {
  if (!detail::cpu_has_avx2_kernels()) GTEST_SKIP() << "CPU has no AVX2/F16C";
  std::mt19937_64 rng(8);
  for (DataType t : kAllDataTypes) {
    const size_t size = dtype_size(t), count = (size_t{9} << 20) / size + 13;
    std::vector<uint8_t> a(count * size), b(count * size);
    for (size_t i = 0; i < count; ++i) put(a, i, size, rng()), put(b, i, size, rng());
    std::vector<uint8_t> fast((count + 1) * size + 32), slow(count * size);
    uint8_t* out = fast.data() + (32 - reinterpret_cast<uintptr_t>(fast.data()) % 32) + size;
    detail::reduce_into_avx2(out, a.data(), b.data(), count, t, ReduceOp::kMax);
    detail::reduce_into_portable(slow.data(), a.data(), b.data(), count, t, ReduceOp::kMax);
    ASSERT_EQ(std::memcmp(out, slow.data(), slow.size()), 0) << dtype_name(t);
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceGrid,
                         ::testing::Combine(::testing::ValuesIn(kAllDataTypes),
                                            ::testing::ValuesIn(kAllReduceOps)),
                         param_name);

// All 65536 f16 and bf16 patterns against partners that reach every rounding path.
class HalfPatterns : public ReduceGrid {};

TEST_P(HalfPatterns, EveryPatternMatchesReference) {
  const auto [t, op] = GetParam();
  constexpr size_t kPatterns = 65536;
  std::vector<uint8_t> a(kPatterns * 2), b(kPatterns * 2);
  for (size_t i = 0; i < kPatterns; ++i) put(a, i, 2, i);
  std::mt19937_64 rng(99);
  const uint64_t fixed[] = {0x0000, 0x8000, 0x0001, 0x3C00, 0xBC00, 0x7BFF, 0x3F80, 0x4000, 0x0400};
  for (int partner = 0; partner < 12; ++partner) {
    for (size_t i = 0; i < kPatterns; ++i)
      put(b, i, 2, partner < 9 ? fixed[partner] : random_element(t, rng));
    for (const ReduceFn& fn : kFamilies) {
      const std::vector<uint8_t> dst = run_reduce(fn, a, b, kPatterns, t, op, Alias::kSeparate);
      for (size_t i = 0; i < kPatterns; ++i) {
        const Expected want = reference(t, op, i, get(b, i, 2));
        const uint64_t got = get(dst, i, 2);
        if (want.any_nan) {
          ASSERT_TRUE(std::isnan(float_value(t, got))) << describe(t, op, 0, i, i, get(b, i, 2));
        } else {
          ASSERT_EQ(got, want.bits) << describe(t, op, 0, i, i, get(b, i, 2));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(F16AndBF16, HalfPatterns,
                         ::testing::Combine(::testing::Values(DataType::kFloat16,
                                                              DataType::kBFloat16),
                                            ::testing::ValuesIn(kAllReduceOps)),
                         param_name);

// min/max give the same bits for (a, b) and (b, a), with +-0 and NaN in the mix.
class MinMax : public ReduceGrid {};

TEST_P(MinMax, CommuteBitwise) {
  const auto [t, op] = GetParam();
  std::mt19937_64 rng(5);
  const size_t size = dtype_size(t), count = 2000;
  std::vector<uint8_t> a(count * size), b(count * size);
  const uint64_t sign = 1ull << (8 * size - 1);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t x = random_element(t, rng);
    put(a, i, size, x);
    // Partners: the same value, its sign flipped (so +-0 pairs), or another random value.
    put(b, i, size, i % 3 == 0 ? x : i % 3 == 1 ? (x ^ sign) : random_element(t, rng));
    if (i % 5 == 0) put(a, i, size, 0), put(b, i, size, sign);  // +0 vs -0
  }
  for (const ReduceFn& fn : kFamilies) {
    const auto ab = run_reduce(fn, a, b, count, t, op, Alias::kSeparate);
    const auto ba = run_reduce(fn, b, a, count, t, op, Alias::kSeparate);
    ASSERT_EQ(ab, ba) << dtype_name(t) << " " << reduce_op_name(op);
    if (dtype_is_float(t)) {
      EXPECT_EQ(get(ab, 0, size), op == ReduceOp::kMin ? sign : 0) << "min/max of +0 and -0";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MinMax,
                         ::testing::Combine(::testing::ValuesIn(kAllDataTypes),
                                            ::testing::Values(ReduceOp::kMin, ReduceOp::kMax)),
                         param_name);

// ---- hand-checked values ------------------------------------------------------------------
// Each case is repeated so it passes through the vector body as well as the tail; kNaN means "any
// NaN". Runs both kernel families.
constexpr uint64_t kNaN = ~0ull;

void expect_cases(DataType t, ReduceOp op, const std::vector<uint64_t>& a,
                  const std::vector<uint64_t>& b, const std::vector<uint64_t>& want) {
  const size_t size = dtype_size(t), repeats = 9, count = a.size() * repeats;
  std::vector<uint8_t> va(count * size), vb(count * size);
  for (size_t i = 0; i < count; ++i)
    put(va, i, size, a[i % a.size()]), put(vb, i, size, b[i % a.size()]);
  for (const ReduceFn& fn : kFamilies) {
    const std::vector<uint8_t> dst = run_reduce(fn, va, vb, count, t, op, Alias::kDstIsA);
    for (size_t i = 0; i < count; ++i) {
      const size_t c = i % a.size();
      if (want[c] == kNaN) {
        EXPECT_TRUE(std::isnan(float_value(t, get(dst, i, size))))
            << describe(t, op, count, i, a[c], b[c]);
      } else {
        EXPECT_EQ(get(dst, i, size), want[c]) << describe(t, op, count, i, a[c], b[c]);
      }
    }
  }
}

uint64_t f32(float v) { return std::bit_cast<uint32_t>(v); }

TEST(ReduceSpecialValues, Float32) {
  const float inf = INFINITY, nan = NAN;
  expect_cases(
      DataType::kFloat32, ReduceOp::kSum,
      {f32(nan), f32(inf), f32(inf), f32(-0.f), f32(0.f), 1, f32(-inf), f32(FLT_MAX), f32(1)},
      {f32(1), f32(-inf), f32(1), f32(-0.f), f32(-0.f), 1, f32(5), f32(FLT_MAX), f32(nan)},
      {kNaN, kNaN, f32(inf), f32(-0.f), f32(0.f), 2, f32(-inf), f32(inf), kNaN});
  expect_cases(DataType::kFloat32, ReduceOp::kProd,
               {f32(inf), f32(0.f), f32(-0.f), f32(1e-30f), f32(1e-20f), f32(-2.f)},
               {f32(0.f), f32(-3.f), f32(-0.f), f32(1e-30f), f32(1e-20f), f32(inf)},
               {kNaN, f32(-0.f), f32(0.f), f32(0.f), f32(1e-40f), f32(-inf)});
}

TEST(ReduceSpecialValues, Float16) {
  // 65504 + 16 = 65520 is halfway to 65536: ties to even gives Inf. 2048 + 1 and 2050 + 1 are
  // ties too (ulp 2 there): 2048 stays, 2051 goes to 2052. 0x0001 is the smallest subnormal.
  expect_cases(DataType::kFloat16, ReduceOp::kSum,
               {0x7BFF, 0x7BFF, 0x7BFF, 0x6800, 0x6801, 0x0001, 0x03FF, 0x8000, 0x0000, 0x7E00,
                0x7C00, 0x7C00, 0xFBFF},
               {0x7BFF, 0x4C00, 0x4800, 0x3C00, 0x3C00, 0x0001, 0x0001, 0x8000, 0x8000, 0x3C00,
                0xFC00, 0x3C00, 0xFBFF},
               {0x7C00, 0x7C00, 0x7BFF, 0x6800, 0x6802, 0x0002, 0x0400, 0x8000, 0x0000, kNaN, kNaN,
                0x7C00, 0xFC00});
  expect_cases(DataType::kFloat16, ReduceOp::kProd, {0x5C00, 0x0200, 0x3C01},
               {0x5C00, 0x3800, 0x3C01}, {0x7C00, 0x0100, 0x3C02});
}

TEST(ReduceSpecialValues, BFloat16) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7 (stays 1.0, even); 1 + 3 * 2^-8 goes up to even.
  expect_cases(DataType::kBFloat16, ReduceOp::kSum,
               {0x7F7F, 0x3F80, 0x3F81, 0x7F81, 0x0001, 0x8000, 0xFF80, 0xFF7F},
               {0x7F7F, 0x3B80, 0x3B80, 0x3F80, 0x0001, 0x0000, 0x7F80, 0xFF7F},
               {0x7F80, 0x3F80, 0x3F82, kNaN, 0x0002, 0x0000, kNaN, 0xFF80});
  // A NaN whose payload sits only in the bits rounding drops must not become Inf.
  EXPECT_EQ(half::f32_to_bf16(half::f32_from_bits(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(half::f32_to_bf16(half::f32_from_bits(0xFF80FFFFu)), 0xFFC0);
}

TEST(ReduceIntegers, WrapAround) {
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  const int64_t i32_max = INT32_MAX, i32_min = INT32_MIN, i64_max = INT64_MAX, i64_min = INT64_MIN;
  const int64_t two32 = int64_t{1} << 32;
  expect_cases(DataType::kInt32, ReduceOp::kSum, {u(i32_max), u(i32_min), u(-1)}, {1, u(-1), 1},
               {u(i32_min) & 0xFFFFFFFF, u(i32_max), 0});
  expect_cases(DataType::kInt32, ReduceOp::kProd, {65536, 46341, u(-1), u(i32_min)},
               {65536, 46341, u(i32_min), u(-1)},
               {0, u(-2147479015) & 0xFFFFFFFF, u(i32_min) & 0xFFFFFFFF, u(i32_min) & 0xFFFFFFFF});
  expect_cases(DataType::kInt64, ReduceOp::kSum, {u(i64_max), u(i64_min)}, {1, u(-1)},
               {u(i64_min), u(i64_max)});
  expect_cases(DataType::kInt64, ReduceOp::kProd, {u(two32), u(two32 + 1), u(-3), u(i64_min)},
               {u(two32), u(two32 + 1), 5, u(-1)}, {0, u(2 * two32 + 1), u(-15), u(i64_min)});
  expect_cases(DataType::kInt64, ReduceOp::kMin, {u(-1), u(i64_min)}, {1, u(i64_max)},
               {u(-1), u(i64_min)});
  expect_cases(DataType::kInt64, ReduceOp::kMax, {u(-1), u(i64_min)}, {1, u(i64_max)},
               {1, u(i64_max)});
  expect_cases(DataType::kUInt8, ReduceOp::kSum, {255, 200}, {1, 100}, {0, 44});
  expect_cases(DataType::kUInt8, ReduceOp::kProd, {16, 15, 255}, {16, 17, 255}, {0, 255, 1});
  expect_cases(DataType::kUInt8, ReduceOp::kMin, {200, 0}, {100, 255}, {100, 0});
  expect_cases(DataType::kUInt8, ReduceOp::kMax, {200, 0}, {100, 255}, {200, 255});
}

// ---- scale_in_place: multiply by (float)factor in f32 (f64: by factor), round once -----------
TEST(ScaleInPlace, MatchesReference) {
  using ScaleFn = std::function<void(void*, size_t, DataType, double)>;
  const ScaleFn families[] = {scale_in_place, detail::scale_in_place_portable};
  std::mt19937_64 rng(3);
  for (DataType t :
       {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16}) {
    const size_t size = dtype_size(t);
    for (double factor : {0.25, 1.0 / 3.0, 1e-3}) {
      for (size_t count : kCounts) {
        std::vector<uint8_t> in(count * size);
        for (size_t i = 0; i < count; ++i) put(in, i, size, random_element(t, rng));
        for (const ScaleFn& fn : families) {
          std::vector<uint8_t> buf = in;
          fn(buf.data(), count, t, factor);
          for (size_t i = 0; i < count; ++i) {
            const double x = float_value(t, get(in, i, size));
            const double want =
                t == DataType::kFloat64
                    ? x * factor
                    : static_cast<double>(static_cast<float>(x) * static_cast<float>(factor));
            const uint64_t got = get(buf, i, size);
            if (std::isnan(want)) {
              EXPECT_TRUE(std::isnan(float_value(t, got)));
            } else {
              ASSERT_EQ(got, float_bits(t, want))
                  << dtype_name(t) << " x=" << x << " factor " << factor;
            }
          }
        }
      }
    }
  }
}

TEST(ScaleInPlace, RejectsIntegersAndUnknownTypes) {
  int32_t x = 4;
  for (DataType t : {DataType::kInt32, DataType::kInt64, DataType::kUInt8}) {
    try {
      scale_in_place(&x, 1, t, 0.5);
      FAIL() << "scaled " << dtype_name(t);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(dtype_name(t)), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(x, 4);
  scale_in_place(nullptr, 0, DataType::kFloat32, 0.5);  // nothing to do, no throw
  reduce_into(nullptr, nullptr, nullptr, 0, DataType::kFloat16, ReduceOp::kSum);
  EXPECT_THROW(reduce_into(&x, &x, &x, 1, static_cast<DataType>(42), ReduceOp::kSum), Error);
  EXPECT_THROW(reduce_into(&x, &x, &x, 1, DataType::kInt32, static_cast<ReduceOp>(42)), Error);
  EXPECT_THROW(reduce_into(nullptr, &x, &x, 1, DataType::kInt32, ReduceOp::kSum), Error);
}

TEST(ReduceKernelIsa, NamesTheDispatchedFamily) {
  const std::string isa = reduce_kernel_isa();
#if RINGD_REDUCE_HAVE_AVX2_KERNELS
  EXPECT_EQ(isa, detail::cpu_has_avx2_kernels() ? "avx2+f16c" : "portable");
#else
  EXPECT_EQ(isa, "portable");
#endif
}

}  // namespace
}  // namespace ringd
