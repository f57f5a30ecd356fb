// Deep gradient compression's top-k selection on a 25 M-element float32 gradient (100 MB; standard
// normal values, fixed seed): select_and_pack_top_k, and select_top_k + pack_selected, per call,
// against the exact baseline (nth_element over a copy of every magnitude, then the same pack) and
// against one read-only pass over the tensor, the floor any selection pays. bytes_per_second counts
// the tensor's 100 MB once. Arguments: sparsity in per mille kept away (999: k = 25,000; 990: k =
// 250,000) and, for select_top_k, the sample fraction in millionths.
//
// And DGC's whole per-tensor step as the compressor runs it (u = m u + g, v += u, then the top k
// of v): the accumulation alone (BM_Accumulate), followed by select_and_pack_top_k (the two
// passes of before), and fused into one pass (accumulate_select_and_pack_top_k, what
// DgcTensorState::compress_sparse runs). Fused minus accumulation alone is what selecting and
// packing cost on top of the accumulation the step needs anyway.
//
//   build/bench/dgc_select_bench --benchmark_min_time=1 --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true   (one command line)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "compression/dgc_compressor.h"
#include "compression/topk_select.h"

namespace ringd::compression {
namespace {

constexpr size_t kCount = 25'000'000;

const std::vector<float>& gradient() {
  static const std::vector<float> values = [] {
    std::mt19937 rng(2018);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(kCount);
    for (float& x : v) x = normal(rng);
    return v;
  }();
  return values;
}

size_t k_for(const benchmark::State& state) {
  return kCount - kCount / 1000 * static_cast<size_t>(state.range(0));
}

void report(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(kCount * sizeof(float)));
}

void select_bench(benchmark::State& state, bool fused) {
  const std::vector<float>& values = gradient();
  TopkOptions options;
  options.sample_fraction = static_cast<double>(state.range(1)) * 1e-6;
  std::vector<uint32_t> indices;
  std::vector<float> packed;
  TopkStats stats;
  for (auto _ : state) {
    if (fused) {
      select_and_pack_top_k(values.data(), kCount, k_for(state), options, &indices, &packed,
                            &stats);
    } else {
      select_top_k(values.data(), kCount, k_for(state), options, &indices, &stats);
      pack_selected(values.data(), kCount, indices, &packed);
    }
    benchmark::DoNotOptimize(packed.data());
  }
  report(state);
  state.counters["k"] = static_cast<double>(k_for(state));
  state.counters["candidates"] = static_cast<double>(stats.candidates);
  state.counters["scans"] = stats.scan_rounds;
}

// select_and_pack_top_k: the values come from the candidate lists.
void BM_SelectAndPack(benchmark::State& state) { select_bench(state, true); }
// select_top_k, then pack_selected gathering from the tensor.
void BM_SelectThenPack(benchmark::State& state) { select_bench(state, false); }

// The straightforward exact selection: copy |x|, nth_element, one pass keeping what beats the k-th
// (ties to the lower index), then the same pack.
void BM_ExactNthElementAndPack(benchmark::State& state) {
  const std::vector<float>& values = gradient();
  const size_t k = k_for(state);
  std::vector<float> magnitudes(kCount);
  std::vector<uint32_t> indices;
  std::vector<float> packed;
  for (auto _ : state) {
    std::transform(values.begin(), values.end(), magnitudes.begin(),
                   [](float x) { return std::fabs(x); });
    std::nth_element(magnitudes.begin(), magnitudes.begin() + (k - 1), magnitudes.end(),
                     std::greater<>());
    const float kth = magnitudes[k - 1];
    size_t ties = static_cast<size_t>(std::count(magnitudes.begin(), magnitudes.begin() + k, kth));
    indices.clear();
    for (size_t i = 0; i < kCount; ++i) {
      const float magnitude = std::fabs(values[i]);
      if (magnitude > kth || (magnitude == kth && ties > 0 && ties-- > 0)) {
        indices.push_back(static_cast<uint32_t>(i));
      }
    }
    pack_selected(values.data(), kCount, indices, &packed);
    benchmark::DoNotOptimize(packed.data());
  }
  report(state);
}

// One read of the tensor the way the scan reads it (four quarters side by side, 16-float blocks,
// OR of sign bits) with a threshold nothing reaches: the floor any selection pays.
__attribute__((target_clones("avx2", "default"))) uint32_t read_pass(const float* values,
                                                                     size_t count) {
  const size_t quarter = count / 64 * 16;
  uint32_t hits = 0;
  for (size_t offset = 0; offset < quarter; offset += 16) {
    for (size_t stream = 0; stream < 4; ++stream) {
      const float* block = values + stream * quarter + offset;
      uint32_t any = 0;
      for (size_t j = 0; j < 16; ++j) {
        any |= 0x7F7FFFFFu - (std::bit_cast<uint32_t>(block[j]) & 0x7FFFFFFFu);
      }
      hits += any >> 31;
    }
  }
  return hits;
}

void BM_ReadPass(benchmark::State& state) {
  const std::vector<float>& values = gradient();
  for (auto _ : state) benchmark::DoNotOptimize(read_pass(values.data(), kCount));
  report(state);
}

// DGC's step over g, u, v of 25 M floats (u and v carry over between iterations, as in training;
// nothing is masked, so both variants see the same values).
struct DgcArrays {
  std::vector<float> u = std::vector<float>(kCount, 0.0f);
  std::vector<float> v = std::vector<float>(kCount, 0.0f);
};

void accumulate(const float* g, float* u, float* v, size_t count) {
  accumulate_velocity(g, u, v, count, 0.9f, 1.0f);  // the compressor's dense accumulation
}

void BM_Accumulate(benchmark::State& state) {
  const std::vector<float>& g = gradient();
  DgcArrays arrays;
  for (auto _ : state) {
    accumulate(g.data(), arrays.u.data(), arrays.v.data(), kCount);
    benchmark::DoNotOptimize(arrays.v.data());
  }
  report(state);
}

void BM_AccumulateThenSelect(benchmark::State& state) {
  const std::vector<float>& g = gradient();
  DgcArrays arrays;
  std::vector<uint32_t> indices;
  std::vector<float> packed;
  for (auto _ : state) {
    accumulate(g.data(), arrays.u.data(), arrays.v.data(), kCount);
    select_and_pack_top_k(arrays.v.data(), kCount, k_for(state), TopkOptions{}, &indices, &packed);
    benchmark::DoNotOptimize(packed.data());
  }
  report(state);
}

void BM_AccumulateSelectFused(benchmark::State& state) {
  const std::vector<float>& g = gradient();
  DgcArrays arrays;
  std::vector<uint32_t> indices;
  std::vector<float> packed;
  TopkStats stats;
  for (auto _ : state) {
    accumulate_select_and_pack_top_k(g.data(), arrays.u.data(), arrays.v.data(), kCount, 0.9f, 1.0f,
                                     k_for(state), TopkOptions{}, &indices, &packed, &stats);
    benchmark::DoNotOptimize(packed.data());
  }
  report(state);
  state.counters["candidates"] = static_cast<double>(stats.candidates);
  state.counters["scans"] = stats.scan_rounds;
}

// The memory system of a shared machine is noisy: with --benchmark_repetitions the fastest run is
// reported beside mean and median.
double fastest(const std::vector<double>& runs) {
  return *std::min_element(runs.begin(), runs.end());
}

void sample_fractions(benchmark::internal::Benchmark* bench) {
  for (int64_t per_mille : {999, 990}) {
    for (int64_t millionths : {200, 500, 1000, 3000, 10000}) bench->Args({per_mille, millionths});
  }
}

BENCHMARK(BM_ReadPass)->Unit(benchmark::kMillisecond)->ComputeStatistics("min", fastest);
BENCHMARK(BM_SelectAndPack)
    ->Apply(sample_fractions)
    ->Unit(benchmark::kMillisecond)
    ->ComputeStatistics("min", fastest);
BENCHMARK(BM_SelectThenPack)
    ->Args({999, 500})
    ->Args({990, 500})
    ->Unit(benchmark::kMillisecond)
    ->ComputeStatistics("min", fastest);
BENCHMARK(BM_Accumulate)->Unit(benchmark::kMillisecond)->ComputeStatistics("min", fastest);
BENCHMARK(BM_AccumulateThenSelect)
    ->Arg(999)
    ->Unit(benchmark::kMillisecond)
    ->ComputeStatistics("min", fastest);
BENCHMARK(BM_AccumulateSelectFused)
    ->Arg(999)
    ->Unit(benchmark::kMillisecond)
    ->ComputeStatistics("min", fastest);
BENCHMARK(BM_ExactNthElementAndPack)
    ->Arg(999)
    ->Arg(990)
    ->Unit(benchmark::kMillisecond)
    ->ComputeStatistics("min", fastest);

}  // namespace
}  // namespace ringd::compression

BENCHMARK_MAIN();
