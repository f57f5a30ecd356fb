#include "compression/topk_select.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <numeric>

#include "common/target_clones.h"
#include "compression/dgc_accumulate.h"
#include "ringd/error.h"

namespace ringd::compression {
namespace {

/*
 * How select_top_k finds the k largest of n magnitudes without sorting n of them.
 *
 *   values  |.........:.........:.........:.........:.........:...|   n floats (25 M: 100 MB)
 *   sample   ^         ^         ^         ^         ^                m = n * sample_fraction,
 *            first     +stride   ...                                  first from the seed
 *
 * 1. Threshold. e = k m / n is how many of the true top k the sample should hold; t is the r-th
 *    largest sampled magnitude with r = e + 3 sqrt(e) + 1, so about r n / m >= k elements reach t
 *    (short only when the sample holds 3 standard deviations more of the top k than it should).
 * 2. One pass over the tensor, its four quarters side by side (four prefetch streams read ~1.6x
 *    faster than one), one 16-float block (a cache line) of each quarter per step:
 *
 *        quarter 0  [16][16][16]...    quarter 1  [16][16]...    quarter 2 ...    quarter 3 ...
 *        step s:    block s of quarter 0, of 1, of 2, of 3: any |x| >= t ?  (OR of sign bits)
 *
 *    Only blocks that hit write their elements >= t, branch-free, as (index, value) pairs, to
 *    their quarter's list; the lists one after another are in index order.
 * 3. With c >= k candidates: nth_element on a copy of their magnitudes gives the k-th largest K
 *    and how many K's are in the top k; one walk over the lists keeps those above K and the first
 *    K's: exactly k, ascending, ties to the lower index, values at hand for packing. O(n + c).
 * 4. With c < k (the sample held more large values than the tensor): t drops to the sample's
 *    4r-th largest, strictly below the last t, and step 2 runs again; at most kMaxScanRounds.
 * 5. Exact fallback, step 3 over a copy of all n magnitudes, when: the rescans ran out or the
 *    sample has nothing below t; t would be 0 (a sample of zeros: everything is a candidate); or
 *    the candidates would pass a quarter of the tensor (k near n), where the copy costs no more.
 */
constexpr size_t kBlock = 16;
constexpr size_t kStreams = 4;
constexpr size_t kMinSampleSize = 1024;
constexpr int kMaxScanRounds = 3;
constexpr size_t kRankGrowth = 4;
constexpr size_t kMaxCandidateShare = 4;  // candidates beyond count / 4: exact selection instead
constexpr uint64_t kMaxCount = uint64_t{1} << 32;

uint32_t magnitude_bits(float value) { return std::bit_cast<uint32_t>(value) & 0x7FFFFFFFu; }

// One quarter's candidates in index order. The vectors are kept longer than `size` so that a
// block's branch-free writes (up to kStreams * kBlock of them) always have room.
struct CandidateList {
  std::vector<uint32_t> index;
  std::vector<float> value;
  size_t size = 0;
};
using Candidates = std::array<CandidateList, kStreams>;

// Appends values[base, base + length) with magnitude above `below`: writes every element and
// advances past those that qualify.
inline void append_hits(const float* values, size_t base, size_t length, uint32_t below,
                        CandidateList* list) {
  if (list->size + length > list->index.size()) {
    list->index.resize(2 * list->index.size() + kStreams * kBlock);
    list->value.resize(list->index.size());
  }
  size_t size = list->size;
  for (size_t j = 0; j < length; ++j) {
    const float value = values[base + j];
    list->index[size] = static_cast<uint32_t>(base + j);
    list->value[size] = value;
    size += magnitude_bits(value) > below;
  }
  list->size = size;
}

// Every element with magnitude_bits >= threshold (>= 1) into its quarter's list. The hot loop:
// `below - m` has its sign bit set exactly when m > below, so an OR over a block tests all of it;
// the compiler vectorises it, with AVX2 where the CPU has it.
RINGD_AVX2_CLONES void scan_candidates(const float* values, size_t count, uint32_t threshold,
                                       Candidates* lists) {
  const uint32_t below = threshold - 1;
  const size_t quarter = count / (kStreams * kBlock) * kBlock;
  for (CandidateList& list : *lists) list.size = 0;
  for (size_t offset = 0; offset < quarter; offset += kBlock) {
    for (size_t stream = 0; stream < kStreams; ++stream) {
      const float* block = values + stream * quarter + offset;
      uint32_t any = 0;
      for (size_t j = 0; j < kBlock; ++j) any |= below - magnitude_bits(block[j]);
      if (any >> 31)
        append_hits(values, stream * quarter + offset, kBlock, below, &(*lists)[stream]);
    }
  }
  // The last count % (kStreams * kBlock) elements follow the last quarter.
  const size_t tail = kStreams * quarter;
  append_hits(values, tail, count - tail, below, &lists->back());
}

// DGC's accumulation (u = m u + s g, v += u) fused with scan_candidates' test: each 16-element
// block is computed, written back, and its elements with magnitude_bits >= threshold appended to
// `list` (index order). threshold 0x80000000 (above every magnitude, NaN's included) accumulates
// only. One stream per array rather than scan_candidates' four quarters: the pass already reads
// three arrays and writes two.
RINGD_AVX2_CLONES void accumulate_and_scan(const float* __restrict gradient,
                                           float* __restrict velocity,
                                           float* __restrict accumulated, size_t count,
                                           float momentum, float scale, uint32_t threshold,
                                           CandidateList* list) {
  const uint32_t below = threshold - 1;
  list->size = 0;
  const size_t blocks = count / kBlock * kBlock;
  for (size_t base = 0; base < blocks; base += kBlock) {
    uint32_t any = 0;
    for (size_t j = 0; j < kBlock; ++j) {
      accumulate_element(gradient[base + j], momentum, scale, velocity[base + j],
                         accumulated[base + j]);
      any |= below - magnitude_bits(accumulated[base + j]);
    }
    if (any >> 31) append_hits(accumulated, base, kBlock, below, list);
  }
  for (size_t i = blocks; i < count; ++i) {
    accumulate_element(gradient[i], momentum, scale, velocity[i], accumulated[i]);
  }
  append_hits(accumulated, blocks, count - blocks, below, list);
}

// The k-th largest of `magnitudes` (k >= 1; permuted) and how many copies of it are in the top k.
struct Cutoff {
  uint32_t magnitude;
  size_t ties_left;

  // Called in index order: whether the element of this magnitude is in the top k.
  bool keeps(uint32_t candidate) {
    if (candidate != magnitude) return candidate > magnitude;
    if (ties_left == 0) return false;
    --ties_left;
    return true;
  }
};
Cutoff find_cutoff(std::vector<uint32_t>* magnitudes, size_t k) {
  auto kth = magnitudes->begin() + static_cast<ptrdiff_t>(k - 1);
  std::nth_element(magnitudes->begin(), kth, magnitudes->end(), std::greater<>());
  const uint32_t cutoff = *kth;
  return {cutoff, static_cast<size_t>(std::count(magnitudes->begin(), kth, cutoff)) + 1};
}

void keep_top_k_of_candidates(const Candidates& lists, size_t k, std::vector<uint32_t>* indices,
                              std::vector<float>* packed) {
  std::vector<uint32_t> magnitudes;
  size_t total = 0;
  for (const CandidateList& list : lists) total += list.size;
  magnitudes.reserve(total);
  for (const CandidateList& list : lists) {
    for (size_t i = 0; i < list.size; ++i) magnitudes.push_back(magnitude_bits(list.value[i]));
  }
  Cutoff cutoff = find_cutoff(&magnitudes, k);
  indices->reserve(k);
  if (packed != nullptr) packed->reserve(k);
  for (const CandidateList& list : lists) {
    for (size_t i = 0; i < list.size; ++i) {
      if (!cutoff.keeps(magnitude_bits(list.value[i]))) continue;
      indices->push_back(list.index[i]);
      if (packed != nullptr) packed->push_back(list.value[i]);
    }
  }
}

void keep_top_k_exactly(const float* values, size_t count, size_t k, std::vector<uint32_t>* indices,
                        std::vector<float>* packed) {
  std::vector<uint32_t> magnitudes(count);
  for (size_t i = 0; i < count; ++i) magnitudes[i] = magnitude_bits(values[i]);
  Cutoff cutoff = find_cutoff(&magnitudes, k);
  indices->reserve(k);
  for (size_t i = 0; i < count; ++i) {
    if (cutoff.keeps(magnitude_bits(values[i]))) indices->push_back(static_cast<uint32_t>(i));
  }
  if (packed != nullptr) pack_selected(values, count, *indices, packed);
}

// The largest sampled magnitude strictly below `threshold`, or 0 when there is none.
uint32_t next_lower(const std::vector<uint32_t>& sample, uint32_t threshold) {
  uint32_t lower = 0;
  for (uint32_t magnitude : sample) {
    if (magnitude < threshold) lower = std::max(lower, magnitude);
  }
  return lower;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The sample's rank whose magnitude is the first threshold: about rank x count / sample size >= k
// elements reach it (see the block comment above).
size_t first_rank(size_t k, size_t count, size_t sample_size) {
  const double expected =
      static_cast<double>(k) * static_cast<double>(sample_size) / static_cast<double>(count);
  return static_cast<size_t>(std::ceil(expected + 3 * std::sqrt(expected))) + 1;
}

// select_top_k's body; `packed` may be null.
void select(const float* values, size_t count, size_t k, const TopkOptions& options,
            std::vector<uint32_t>* indices, std::vector<float>* packed, TopkStats* stats) {
  RINGD_CHECK_ARG(indices != nullptr, "select_top_k: indices is null");
  RINGD_CHECK_ARG(count <= kMaxCount, "select_top_k: count "
                                          << count << " exceeds 2^32, the most uint32_t indices "
                                          << "address; split the tensor");
  RINGD_CHECK_ARG(values != nullptr || count == 0, "select_top_k: values is null, count " << count);
  const TopkSamplePlan plan = plan_topk_sample(count, options);
  TopkStats local_stats;
  TopkStats& stat = stats != nullptr ? *stats : local_stats;
  stat = TopkStats{};
  indices->clear();
  if (packed != nullptr) packed->clear();
  if (k == 0 || count == 0) return;
  if (k >= count) {
    indices->resize(count);
    std::iota(indices->begin(), indices->end(), uint32_t{0});
    if (packed != nullptr) packed->assign(values, values + count);
    return;
  }

  std::vector<uint32_t> sample(plan.size);
  for (size_t j = 0; j < plan.size; ++j) {
    sample[j] = magnitude_bits(values[plan.first + j * plan.stride]);
  }
  stat.sample_size = plan.size;
  size_t rank = first_rank(k, count, plan.size);
  uint32_t threshold = 0;
  Candidates lists;
  for (CandidateList& list : lists) {  // room for the expected rank * stride candidates
    list.index.resize(rank * plan.stride / kStreams + rank + kStreams * kBlock);
    list.value.resize(list.index.size());
  }
  for (int round = 0; round < kMaxScanRounds && rank * kMaxCandidateShare <= plan.size; ++round) {
    auto at_rank = sample.begin() + static_cast<ptrdiff_t>(rank - 1);
    std::nth_element(sample.begin(), at_rank, sample.end(), std::greater<>());
    threshold = (round == 0 || *at_rank < threshold) ? *at_rank : next_lower(sample, threshold);
    if (threshold == 0) break;
    scan_candidates(values, count, threshold, &lists);
    stat.scan_rounds = round + 1;
    stat.candidates = 0;
    for (const CandidateList& list : lists) stat.candidates += list.size;
    if (stat.candidates >= k) {
      keep_top_k_of_candidates(lists, k, indices, packed);
      return;
    }
    rank *= kRankGrowth;
  }
  stat.exact_fallback = true;
  stat.candidates = count;
  keep_top_k_exactly(values, count, k, indices, packed);
}

void check_pack_arguments(const float* values, size_t count, const std::vector<uint32_t>& indices,
                          const std::vector<float>* packed) {
  RINGD_CHECK_ARG(packed != nullptr, "pack_selected: packed is null");
  RINGD_CHECK_ARG(values != nullptr || indices.empty(),
                  "pack_selected: values is null with " << indices.size() << " indices");
  for (size_t i = 0; i < indices.size(); ++i) {
    RINGD_CHECK_ARG(indices[i] < count, "pack_selected: indices[" << i << "] = " << indices[i]
                                                                  << " is not below count "
                                                                  << count);
  }
}

}  // namespace

TopkSamplePlan plan_topk_sample(size_t count, const TopkOptions& options) {
  RINGD_CHECK_ARG(
      options.sample_fraction > 0 && options.sample_fraction <= 1,
      "top-k selection: sample_fraction " << options.sample_fraction << " is not in (0, 1]");
  TopkSamplePlan plan;
  const auto wanted =
      static_cast<size_t>(std::ceil(static_cast<double>(count) * options.sample_fraction));
  plan.size = std::min(count, std::max(wanted, kMinSampleSize));
  if (plan.size == 0) return plan;
  plan.stride = count / plan.size;
  plan.first = static_cast<size_t>(splitmix64(options.seed) % plan.stride);
  return plan;
}

void select_top_k(const float* values, size_t count, size_t k, const TopkOptions& options,
                  std::vector<uint32_t>* indices, TopkStats* stats) {
  select(values, count, k, options, indices, nullptr, stats);
}

void select_and_pack_top_k(const float* values, size_t count, size_t k, const TopkOptions& options,
                           std::vector<uint32_t>* indices, std::vector<float>* packed,
                           TopkStats* stats) {
  RINGD_CHECK_ARG(packed != nullptr, "select_and_pack_top_k: packed is null");
  select(values, count, k, options, indices, packed, stats);
}

void accumulate_select_and_pack_top_k(const float* gradient, float* velocity, float* accumulated,
                                      size_t count, float momentum, float scale, size_t k,
                                      const TopkOptions& options, std::vector<uint32_t>* indices,
                                      std::vector<float>* packed, TopkStats* stats) {
  RINGD_CHECK_ARG(indices != nullptr && packed != nullptr,
                  "accumulate_select_and_pack_top_k: indices or packed is null");
  RINGD_CHECK_ARG(
      count == 0 || (gradient != nullptr && velocity != nullptr && accumulated != nullptr),
      "accumulate_select_and_pack_top_k: a null array, count " << count);
  RINGD_CHECK_ARG(count <= kMaxCount, "accumulate_select_and_pack_top_k: count "
                                          << count << " exceeds 2^32, the most uint32_t indices "
                                          << "address; split the tensor");
  const TopkSamplePlan plan = plan_topk_sample(count, options);
  constexpr uint32_t kNothing = 0x80000000u;  // above every magnitude: accumulate only
  uint32_t threshold = kNothing;
  size_t rank = 0;
  if (k > 0 && k < count) {
    rank = first_rank(k, count, plan.size);
    if (rank * kMaxCandidateShare <= plan.size) {
      // The sample of the values the pass is about to write, with the pass's arithmetic.
      std::vector<uint32_t> sample(plan.size);
      for (size_t j = 0; j < plan.size; ++j) {
        const size_t i = plan.first + j * plan.stride;
        float u = velocity[i], v = accumulated[i];  // copies: the pass writes them
        accumulate_element(gradient[i], momentum, scale, u, v);
        sample[j] = magnitude_bits(v);
      }
      auto at_rank = sample.begin() + static_cast<ptrdiff_t>(rank - 1);
      std::nth_element(sample.begin(), at_rank, sample.end(), std::greater<>());
      if (*at_rank > 0) threshold = *at_rank;
    }
  }
  Candidates lists;
  if (threshold != kNothing) {
    lists[0].index.resize(rank * plan.stride + rank + kStreams * kBlock);
    lists[0].value.resize(lists[0].index.size());
  }
  accumulate_and_scan(gradient, velocity, accumulated, count, momentum, scale, threshold,
                      &lists[0]);
  if (threshold != kNothing && lists[0].size >= k) {
    indices->clear();
    packed->clear();
    keep_top_k_of_candidates(lists, k, indices, packed);
    if (stats != nullptr) {
      *stats = TopkStats{};
      stats->sample_size = plan.size;
      stats->candidates = lists[0].size;
      stats->scan_rounds = 1;
    }
    return;
  }
  // No estimate (k = 0, k >= count, a small or zero sample) or too few candidates: the plain
  // selection over what the pass wrote (it checks count and k itself).
  select_and_pack_top_k(accumulated, count, k, options, indices, packed, stats);
}

void pack_selected(const float* values, size_t count, const std::vector<uint32_t>& indices,
                   std::vector<float>* packed) {
  check_pack_arguments(values, count, indices, packed);
  packed->resize(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) (*packed)[i] = values[indices[i]];
}

void pack_and_zero_selected(float* values, size_t count, const std::vector<uint32_t>& indices,
                            std::vector<float>* packed) {
  check_pack_arguments(values, count, indices, packed);
  packed->resize(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    (*packed)[i] = values[indices[i]];
    values[indices[i]] = 0.0f;
  }
}

}  // namespace ringd::compression
