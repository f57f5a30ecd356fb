// select_top_k (and select_and_pack_top_k) against a brute-force reference written here (sort every
// index by |x| descending, index ascending; keep k; sort ascending), over sizes 0..1M and k from 0
// to count + 5, and against closed-form answers for ties, signs, NaN/Inf and tensors built to fool
// the sampled threshold (found off the sample, rescan, exact fallback). Then the packing helpers.
#include "compression/topk_select.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ringd/error.h"
#include "testing/top_k.h"

namespace ringd::compression {
namespace {

using testing::brute_force_top_k;
using testing::normal_values;

bool is_sampled(const TopkSamplePlan& plan, size_t i) {
  return i >= plan.first && (i - plan.first) % plan.stride == 0 &&
         (i - plan.first) / plan.stride < plan.size;
}

std::vector<uint32_t> select(const std::vector<float>& values, size_t k,
                             const TopkOptions& options = {}, TopkStats* stats = nullptr) {
  std::vector<uint32_t> indices{12345};  // stale content the call must clear
  select_top_k(values.data(), values.size(), k, options, &indices, stats);
  return indices;
}

TEST(TopkSelect, MatchesBruteForceOverSizesAndK) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{1} << 20}) {
    const std::vector<float> values = normal_values(count, static_cast<uint32_t>(count));
    for (size_t k : {size_t{0}, size_t{1}, count / 1000, count / 2, count, count + 5}) {
      for (double fraction : {0.001, 0.01, 1.0}) {
        SCOPED_TRACE("count " + std::to_string(count) + " k " + std::to_string(k) + " fraction " +
                     std::to_string(fraction));
        TopkOptions options;
        options.sample_fraction = fraction;
        const std::vector<uint32_t> expected = brute_force_top_k(values, k);
        EXPECT_EQ(select(values, k, options), expected);
        std::vector<uint32_t> indices;
        std::vector<float> packed{1.0f};
        select_and_pack_top_k(values.data(), count, k, options, &indices, &packed);
        EXPECT_EQ(indices, expected);
        ASSERT_EQ(packed.size(), expected.size());
        for (size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(packed[i], values[expected[i]]);
      }
    }
  }
}

// An odd count, so the last partial block of the scan holds winners too.
TEST(TopkSelect, FindsWinnersInTheTailBlock) {
  std::vector<float> values = normal_values((size_t{1} << 16) + 13, 7);
  for (size_t i = values.size() - 13; i < values.size(); ++i) values[i] = 1000.0f + i;
  TopkStats stats;
  EXPECT_EQ(select(values, 100, {}, &stats), brute_force_top_k(values, 100));
  EXPECT_FALSE(stats.exact_fallback);
}

TEST(TopkSelect, AllEqualMagnitudesTieToTheLowerIndices) {
  std::vector<float> values(5000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = i % 3 == 0 ? -2.5f : 2.5f;
  std::vector<uint32_t> first_k(70);
  std::iota(first_k.begin(), first_k.end(), uint32_t{0});
  EXPECT_EQ(select(values, 70), first_k);
}

// values[i] = +-i: the k largest magnitudes are the last k positions, whatever their sign.
TEST(TopkSelect, NegativeValuesRankByMagnitude) {
  std::vector<float> values(4096);
  for (size_t i = 0; i < values.size(); ++i) values[i] = (i % 2 ? -1.0f : 1.0f) * i;
  std::vector<uint32_t> last_k(40);
  std::iota(last_k.begin(), last_k.end(), uint32_t{4096 - 40});
  EXPECT_EQ(select(values, 40), last_k);
}

TEST(TopkSelect, NanRanksAboveInfinityAboveFiniteValues) {
  std::vector<float> values = normal_values(3000, 3);
  values[2900] = std::numeric_limits<float>::quiet_NaN();
  values[10] = -std::numeric_limits<float>::infinity();
  values[20] = std::numeric_limits<float>::infinity();
  values[30] = 1e30f;
  EXPECT_EQ(select(values, 1), (std::vector<uint32_t>{2900}));
  EXPECT_EQ(select(values, 2), (std::vector<uint32_t>{10, 2900}));
  EXPECT_EQ(select(values, 3), (std::vector<uint32_t>{10, 20, 2900}));
  EXPECT_EQ(select(values, 4), (std::vector<uint32_t>{10, 20, 30, 2900}));
}

// Tiny values everywhere the sample reads, huge ones only where it does not: the threshold comes
// out low (many candidates), one scan still finds every huge value.
TEST(TopkSelect, FindsHugeValuesTheSampleMissed) {
  const size_t count = size_t{1} << 20;
  std::vector<float> values = normal_values(count, 11);
  for (float& v : values) v *= 1e-6f;
  const TopkOptions options;
  const TopkSamplePlan plan = plan_topk_sample(count, options);
  ASSERT_GT(plan.stride, 1u);
  std::vector<uint32_t> huge;
  for (size_t i = plan.first + 1; huge.size() < 500; i += 2003) {
    if (is_sampled(plan, i)) continue;
    values[i] = 1e6f + static_cast<float>(i);
    huge.push_back(static_cast<uint32_t>(i));
  }
  TopkStats stats;
  EXPECT_EQ(select(values, huge.size(), options, &stats), huge);
  EXPECT_EQ(stats.scan_rounds, 1);
  EXPECT_FALSE(stats.exact_fallback);
}

// The sample's first 64 positions hold the tensor's only huge values: the first threshold (the
// sample's r-th largest, r ~ 35 for k = 20000 here) leaves r candidates, fewer than k, and the
// second (rank 4r, among the uniform rest) leaves enough.
TEST(TopkSelect, RescansWhenTheSampleOverestimates) {
  const size_t count = size_t{1} << 20, k = 20000;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = uniform(rng);
  const TopkOptions options;
  const TopkSamplePlan plan = plan_topk_sample(count, options);
  for (size_t j = 0; j < 64; ++j) values[plan.first + j * plan.stride] = 100.0f + j;
  TopkStats stats;
  EXPECT_EQ(select(values, k, options, &stats), brute_force_top_k(values, k));
  EXPECT_EQ(stats.scan_rounds, 2);
  EXPECT_FALSE(stats.exact_fallback);
}

// Zeros with 50 spikes off the sample: the sample is all zeros, every element would be a
// candidate, so the exact selection runs: the spikes, then the lowest-index zeros.
TEST(TopkSelect, SpikesOnlyTensorFallsBackToExactSelection) {
  const size_t count = size_t{1} << 20, k = 80;
  std::vector<float> values(count, 0.0f);
  const TopkSamplePlan plan = plan_topk_sample(count, {});
  std::vector<uint32_t> expected;
  for (uint32_t i = 0; i < 30; ++i) expected.push_back(i);  // zeros (no spike below 1000)
  for (size_t i = plan.first + 1000; expected.size() < k; i += 7919) {
    if (is_sampled(plan, i)) continue;
    values[i] = expected.size() % 2 ? 3.0f : -7.0f;
    expected.push_back(static_cast<uint32_t>(i));
  }
  TopkStats stats;
  EXPECT_EQ(select(values, k, {}, &stats), expected);
  EXPECT_TRUE(stats.exact_fallback);
}

// On plain Gaussian data one scan suffices, and the candidates are about r n / m for the rank
// r = e + 3 sqrt(e) + 1 the threshold is taken at (e = k m / n): at most twice that (the r-th
// largest of the sample varies by ~1/sqrt(r), 22 % at k = 10000 here).
TEST(TopkSelect, ThresholdEstimateKeepsCandidatesNearK) {
  const size_t count = size_t{1} << 20;
  const std::vector<float> values = normal_values(count, 13);
  const double sample_size = static_cast<double>(plan_topk_sample(count, {}).size);
  for (size_t k : {size_t{10000}, size_t{100000}}) {
    const double expected = static_cast<double>(k) * sample_size / static_cast<double>(count);
    const double rank = std::ceil(expected + 3 * std::sqrt(expected)) + 1;
    TopkStats stats;
    select(values, k, {}, &stats);
    EXPECT_EQ(stats.scan_rounds, 1) << "k " << k;
    EXPECT_FALSE(stats.exact_fallback);
    EXPECT_GE(stats.candidates, k);
    EXPECT_LE(static_cast<double>(stats.candidates),
              2 * rank * static_cast<double>(count) / sample_size)
        << "k " << k;
  }
}

TEST(TopkSelect, SameSeedSameWorkAnySeedSameResult) {
  const std::vector<float> values = normal_values(100000, 17);
  TopkOptions options;
  options.seed = 42;
  TopkStats first, second;
  const std::vector<uint32_t> a = select(values, 100, options, &first);
  EXPECT_EQ(select(values, 100, options, &second), a);
  EXPECT_EQ(first.candidates, second.candidates);
  for (uint64_t seed = 0; seed < 8; ++seed) {
    options.seed = seed;
    EXPECT_EQ(select(values, 100, options), a) << "seed " << seed;
  }
  EXPECT_NE(plan_topk_sample(100000, {0.001, 1}).first, plan_topk_sample(100000, {0.001, 2}).first);
}

TEST(TopkSelect, RejectsCountBeyondUint32IndicesAndBadOptions) {
  const float one = 1.0f;
  std::vector<uint32_t> indices;
  try {
    select_top_k(&one, (size_t{1} << 32) + 1, 1, {}, &indices);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("count 4294967297"), std::string::npos) << e.what();
  }
  for (double fraction : {0.0, -0.5, 1.5, std::nan("")}) {
    EXPECT_THROW(select_top_k(&one, 1, 1, {fraction, 0}, &indices), Error) << fraction;
  }
  EXPECT_THROW(select_top_k(nullptr, 5, 1, {}, &indices), Error);
  EXPECT_THROW(select_top_k(&one, 1, 1, {}, nullptr), Error);
}

// accumulate_select_and_pack_top_k against the two steps it fuses: the accumulation written out
// here, then select_and_pack_top_k. Velocity, residual, indices and values must be bitwise the
// same, over sizes (tails of count % 16), k from 0 to beyond count, NaNs, a zero tensor (no
// estimate), and a sample fooled into too few candidates (the fallback over the written result).
std::vector<uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<uint32_t> bits(values.size());
  if (!values.empty()) std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

TEST(TopkAccumulateSelect, EqualsTheAccumulationThenTheSelection) {
  const float momentum = 0.9f, scale = 0.75f;
  int cases = 0;
  for (size_t count :
       {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{5003}, (size_t{1} << 20) + 3}) {
    for (const char* kind : {"normal", "nan", "zeros", "fooled"}) {
      std::vector<float> g = normal_values(count, 17), u = normal_values(count, 18),
                         v = normal_values(count, 19);
      const TopkSamplePlan plan = plan_topk_sample(count, {});
      if (std::string(kind) == "nan" && count > 3) {
        g[count / 2] = std::numeric_limits<float>::quiet_NaN();
        v[count - 1] = -std::numeric_limits<float>::infinity();
      } else if (std::string(kind) == "zeros") {
        std::fill(g.begin(), g.end(), 0.0f);
        std::fill(u.begin(), u.end(), 0.0f);
        std::fill(v.begin(), v.end(), 0.0f);
      } else if (std::string(kind) == "fooled") {  // the sample's first 64 hold the only huge ones
        for (size_t j = 0; j < std::min<size_t>(64, plan.size); ++j) {
          v[plan.first + j * plan.stride] = 1e6f + static_cast<float>(j);
        }
      }
      for (size_t k :
           {size_t{0}, size_t{1}, size_t{10}, count / 50, count / 4 + 1, count, count + 5}) {
        std::vector<float> ref_u = u, ref_v = v;
        for (size_t i = 0; i < count; ++i) {
          ref_u[i] = momentum * ref_u[i] + scale * g[i];
          ref_v[i] += ref_u[i];
        }
        std::vector<uint32_t> want_indices, got_indices{7};  // stale content to be cleared
        std::vector<float> want_packed, got_packed{1.0f};
        select_and_pack_top_k(ref_v.data(), count, k, {}, &want_indices, &want_packed);
        std::vector<float> got_u = u, got_v = v;
        TopkStats stats;
        accumulate_select_and_pack_top_k(g.data(), got_u.data(), got_v.data(), count, momentum,
                                         scale, k, {}, &got_indices, &got_packed, &stats);
        const std::string where =
            std::string(kind) + " count " + std::to_string(count) + " k " + std::to_string(k);
        ASSERT_EQ(bits_of(got_u), bits_of(ref_u)) << where;
        ASSERT_EQ(bits_of(got_v), bits_of(ref_v)) << where;
        ASSERT_EQ(got_indices, want_indices) << where;
        ASSERT_EQ(bits_of(got_packed), bits_of(want_packed)) << where;
        if (std::string(kind) == "fooled" && count == (size_t{1} << 20) + 3 && k == count / 50) {
          EXPECT_EQ(stats.scan_rounds, 2) << "the fallback's rescan: " << where;
        }
        if (std::string(kind) == "normal" && count == (size_t{1} << 20) + 3 && k == 10) {
          EXPECT_EQ(stats.scan_rounds, 1) << where;
          EXPECT_LT(stats.candidates, count / 100) << "the fused pass's own candidates";
        }
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 6 * 4 * 7);
  std::vector<uint32_t> indices;
  std::vector<float> packed;
  EXPECT_THROW(accumulate_select_and_pack_top_k(nullptr, nullptr, nullptr, 5, 0.9f, 1.0f, 1, {},
                                                &indices, &packed),
               Error);
}

TEST(TopkPack, GathersTheSelectedValues) {
  const std::vector<float> values = {0.5f, -4.0f, 1.0f, 3.0f, -0.25f};
  std::vector<float> packed{9.0f};
  pack_selected(values.data(), values.size(), {1, 3, 4}, &packed);
  EXPECT_EQ(packed, (std::vector<float>{-4.0f, 3.0f, -0.25f}));
  pack_selected(values.data(), values.size(), {}, &packed);
  EXPECT_TRUE(packed.empty());
  EXPECT_THROW(pack_selected(values.data(), values.size(), {5}, &packed), Error);
}

TEST(TopkPack, PackAndZeroLeavesOnlyTheUnsentResidual) {
  std::vector<float> residual = {0.5f, -4.0f, 1.0f, 3.0f, -0.25f};
  std::vector<uint32_t> indices;
  select_top_k(residual.data(), residual.size(), 2, {}, &indices);
  std::vector<float> packed;
  pack_and_zero_selected(residual.data(), residual.size(), indices, &packed);
  EXPECT_EQ(indices, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(packed, (std::vector<float>{-4.0f, 3.0f}));
  EXPECT_EQ(residual, (std::vector<float>{0.5f, 0.0f, 1.0f, 0.0f, -0.25f}));
  EXPECT_THROW(pack_and_zero_selected(residual.data(), 3, {3}, &packed), Error);
  EXPECT_EQ(residual[3], 0.0f);
}

}  // namespace
}  // namespace ringd::compression
