// Deep gradient compression on one rank: the warm-up schedule, the dense-or-sparse rule, and the
// compressor's four parts (clipping, momentum correction, accumulation of what was not sent,
// momentum factor masking) against a naive reference written from the paper's Algorithm 1.
#include "compression/dgc_compressor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compression/dgc_options.h"
#include "ringd/error.h"
#include "testing/top_k.h"

namespace ringd::compression {
namespace {

TEST(DgcOptions, WarmupThenTheFinalSparsity) {
  const DgcOptions options;
  EXPECT_EQ(sparsity_at(options, 0), 0.75);
  EXPECT_EQ(sparsity_at(options, 1), 0.9375);
  EXPECT_EQ(sparsity_at(options, 2), 0.984375);
  EXPECT_EQ(sparsity_at(options, 3), 0.996);
  EXPECT_EQ(sparsity_at(options, 4), 0.999);
  EXPECT_EQ(sparsity_at(options, 90), 0.999);
  DgcOptions none = options;
  none.warmup.clear();
  EXPECT_EQ(sparsity_at(none, 0), 0.999);
}

TEST(DgcOptions, KeptEntries) {
  EXPECT_EQ(kept_entries(0, 0.999), 0u);
  EXPECT_EQ(kept_entries(1, 0.999), 1u);             // never nothing
  EXPECT_EQ(kept_entries(1000, 0.999), 1u);          // 1.0000000000000009 is 1
  EXPECT_EQ(kept_entries(1001, 0.999), 2u);          // rounded up
  EXPECT_EQ(kept_entries(25557032, 0.999), 25558u);  // ResNet-50's gradient
  EXPECT_EQ(kept_entries(400, 0.75), 100u);
  EXPECT_EQ(kept_entries(10, 0.0), 10u);
}

TEST(DgcOptions, SparseOnlyWhenItMovesFewerBytes) {
  const DgcOptions options;  // min_sparse_elements 4096
  // k x ranks < count: at 99.9% sparse up to 999 ranks.
  EXPECT_TRUE(sends_sparse(options, 1 << 20, 4, 0.999));
  EXPECT_TRUE(sends_sparse(options, 1 << 20, 8, 0.999));
  // Warm-up epoch 0 (75%): k = count / 4, so 4 ranks move as much sparse as dense: dense.
  EXPECT_FALSE(sends_sparse(options, 1 << 20, 4, 0.75));
  EXPECT_TRUE(sends_sparse(options, 1 << 20, 3, 0.75));
  // Small tensors stay dense whatever the bytes.
  EXPECT_FALSE(sends_sparse(options, 4095, 4, 0.999));
  EXPECT_TRUE(sends_sparse(options, 4096, 4, 0.999));
}

TEST(DgcCompressor, MatchesThePapersAlgorithmStepByStep) {
  constexpr size_t kCount = 5000;
  constexpr size_t kKeep = 50;
  constexpr float kMomentum = 0.9f;
  DgcTensorState state(kCount, kMomentum);
  std::vector<float> u(kCount, 0.0f), v(kCount, 0.0f);  // the reference's velocity and residual
  for (uint32_t step = 0; step < 6; ++step) {
    const std::vector<float> g = testing::normal_values(kCount, 100 + step);
    std::vector<SparseEntry> entries;
    state.compress_sparse(g.data(), kKeep, 0.0f, TopkOptions{}, 0, &entries);
    for (size_t i = 0; i < kCount; ++i) {
      u[i] = kMomentum * u[i] + g[i];
      v[i] += u[i];
    }
    const std::vector<uint32_t> sent = testing::brute_force_top_k(v, kKeep);
    ASSERT_EQ(entries.size(), kKeep) << "step " << step;
    for (size_t e = 0; e < kKeep; ++e) {
      ASSERT_EQ(entries[e].index, sent[e]) << "step " << step << " entry " << e;
      ASSERT_EQ(entries[e].value, v[sent[e]]) << "step " << step << " entry " << e;
      v[sent[e]] = 0.0f;  // accumulation keeps only what was not sent
      u[sent[e]] = 0.0f;  // momentum factor masking
    }
    ASSERT_EQ(state.accumulated(), v) << "residual after step " << step;
    ASSERT_EQ(state.velocity(), u) << "velocity after step " << step;
  }
}

TEST(DgcCompressor, NothingIsLostSentPlusResidualIsEveryVelocity) {
  // Without momentum (m = 0) and masking irrelevant, what was sent over the steps plus what is
  // still in the residual is exactly the sum of the gradients (integers: no rounding).
  constexpr size_t kCount = 4096;
  DgcTensorState state(kCount, 0.0f);
  std::vector<double> total_gradient(kCount, 0.0), total_sent(kCount, 0.0);
  for (uint32_t step = 0; step < 8; ++step) {
    std::vector<float> g(kCount);
    for (size_t i = 0; i < kCount; ++i) g[i] = static_cast<float>((i * 7 + step * 13) % 29) - 14;
    std::vector<SparseEntry> entries;
    state.compress_sparse(g.data(), 40, 0.0f, TopkOptions{}, 0, &entries);
    for (size_t i = 0; i < kCount; ++i) total_gradient[i] += g[i];
    for (const SparseEntry& entry : entries) total_sent[entry.index] += entry.value;
  }
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(total_sent[i] + state.accumulated()[i], total_gradient[i]) << "element " << i;
  }
}

TEST(DgcCompressor, IndicesAreOffsetByTheTensorsPlaceInTheBuffer) {
  DgcTensorState state(10, 0.9f);
  const std::vector<float> g = {0, 0, 5, 0, 0, 0, 0, -7, 0, 0};
  std::vector<SparseEntry> entries = {{3, 1.0f}};  // appended to, not replaced
  state.compress_sparse(g.data(), 2, 0.0f, TopkOptions{}, 1000, &entries);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[1].index, 1002u);
  EXPECT_EQ(entries[1].value, 5.0f);
  EXPECT_EQ(entries[2].index, 1007u);
  EXPECT_EQ(entries[2].value, -7.0f);
  DgcTensorState wide(10, 0.9f);
  EXPECT_THROW(wide.compress_sparse(g.data(), 2, 0.0f, TopkOptions{}, 0xFFFFFFFAu, &entries),
               Error);
  EXPECT_THROW(wide.compress_sparse(g.data(), 2, 0.0f, TopkOptions{}, uint64_t{1} << 33, &entries),
               Error);  // a bucket offset past 2^32 must not wrap into a valid-looking index
  DgcTensorState last(10, 0.9f);  // the last 10 indices of the 32-bit range are fine
  EXPECT_NO_THROW(last.compress_sparse(g.data(), 2, 0.0f, TopkOptions{}, 0xFFFFFFF6u, &entries));
}

// The vectorised accumulation (blocks of 16, then the tail) gives the bits of the plain loop.
TEST(DgcCompressor, AccumulateVelocityIsThePlainLoopBitwise) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{1003}}) {
    const std::vector<float> g = testing::normal_values(count, 7);
    std::vector<float> u = testing::normal_values(count, 8), v = testing::normal_values(count, 9);
    std::vector<float> want_u = u, want_v = v;
    for (size_t i = 0; i < count; ++i) {
      want_u[i] = 0.9f * want_u[i] + 0.5f * g[i];
      want_v[i] += want_u[i];
    }
    accumulate_velocity(g.data(), u.data(), v.data(), count, 0.9f, 0.5f);
    if (count == 0) continue;  // nothing to compare (and no buffers to hand memcmp)
    ASSERT_EQ(std::memcmp(u.data(), want_u.data(), count * sizeof(float)), 0) << count;
    ASSERT_EQ(std::memcmp(v.data(), want_v.data(), count * sizeof(float)), 0) << count;
  }
}

TEST(DgcCompressor, DenseKeepsItsMomentum) {
  // A tensor kept dense sends u + v and keeps u: momentum SGD's velocity, step after step.
  constexpr size_t kCount = 64;
  DgcTensorState state(kCount, 0.5f);
  std::vector<float> u(kCount, 0.0f), out(kCount);
  for (uint32_t step = 0; step < 4; ++step) {
    const std::vector<float> g = testing::normal_values(kCount, step);
    state.compress_dense(g.data(), 0.0f, out.data());
    for (size_t i = 0; i < kCount; ++i) u[i] = 0.5f * u[i] + g[i];
    ASSERT_EQ(out, u) << "step " << step;
    ASSERT_EQ(state.accumulated(), std::vector<float>(kCount, 0.0f));
  }
}

TEST(DgcCompressor, LocalClippingScalesTheGradientToTheThreshold) {
  const std::vector<float> g = {3.0f, 4.0f};         // norm 5
  EXPECT_EQ(clip_factor(g.data(), 2, 0.0f), 1.0f);   // off
  EXPECT_EQ(clip_factor(g.data(), 2, 10.0f), 1.0f);  // within
  EXPECT_FLOAT_EQ(clip_factor(g.data(), 2, 2.5f), 0.5f);
  DgcTensorState state(2, 0.0f);
  std::vector<float> out(2);
  state.compress_dense(g.data(), 2.5f, out.data());
  EXPECT_FLOAT_EQ(out[0], 1.5f);
  EXPECT_FLOAT_EQ(out[1], 2.0f);
}

}  // namespace
}  // namespace ringd::compression
