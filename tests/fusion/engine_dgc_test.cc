// The engine with Compression::kDgc: what each rank gets back is the average of every rank's
// compressed velocity, computed here independently with the compressor and the rank-order sum;
// small tensors and warm-up epochs go dense; every rank ends bitwise identical; the stats count
// the pairs; disagreement and bad submissions fail as for dense tensors.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "compression/dgc_compressor.h"
#include "compression/dgc_options.h"
#include "fusion/engine_test_support.h"
#include "ringd/engine.h"
#include "testing/rank_failures.h"
#include "testing/ranks.h"
#include "testing/top_k.h"

namespace ringd {
namespace {

using namespace std::chrono_literals;
using testing::Transport;

// Rank r's gradient of tensor t at step s: a function of (r, t, s) only, so every rank can
// compute every other rank's.
std::vector<float> gradient(int rank, int tensor, int step, size_t count) {
  return testing::normal_values(count,
                                static_cast<uint32_t>(rank * 7919 + tensor * 104729 + step * 31));
}

const std::vector<size_t> kTensorCounts = {50000, 10, 20000, 4096, 3000};  // 10 and 3000: dense

EngineOptions dgc_engine_options() {
  EngineOptions options = testing::test_engine_options();
  options.compression = Compression::kDgc;
  options.dgc.sparsity = 0.99;
  return options;
}

// What every rank must get (the sum) for tensor t at `step`, by running every rank's compressor
// here (the states persist across steps in `states`, one per rank and tensor) and adding in rank
// order.
std::vector<float> expected_sum(std::vector<std::vector<compression::DgcTensorState>>& states,
                                const DgcOptions& options, int ranks, int tensor, int step,
                                int epoch) {
  const size_t count = kTensorCounts[tensor];
  const double sparsity = compression::sparsity_at(options, epoch);
  std::vector<float> sum(count, 0.0f);
  const bool sparse = compression::sends_sparse(options, count, ranks, sparsity);
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> g = gradient(r, tensor, step, count);
    if (sparse) {
      std::vector<compression::SparseEntry> entries;
      states[r][tensor].compress_sparse(g.data(), compression::kept_entries(count, sparsity), 0.0f,
                                        compression::TopkOptions{}, 0, &entries);
      for (const auto& entry : entries) sum[entry.index] += entry.value;
    } else {
      std::vector<float> dense(count);
      states[r][tensor].compress_dense(g.data(), 0.0f, dense.data());
      for (size_t i = 0; i < count; ++i) sum[i] += dense[i];
    }
  }
  return sum;
}

TEST(EngineDgc, EveryRankGetsTheAverageOfTheCompressedVelocities) {
  constexpr int kSize = 4;  // a power of two: x 1/4 is exact, so sparse results compare bitwise
  const EngineOptions options = dgc_engine_options();
  std::vector<std::vector<compression::DgcTensorState>> states(kSize);
  for (auto& per_rank : states) {
    for (size_t count : kTensorCounts) per_rank.emplace_back(count, options.dgc.momentum);
  }
  std::mutex mutex;
  std::vector<std::vector<std::vector<float>>> results(kSize);  // [rank][step * tensors + t]
  std::vector<EngineStats> stats(kSize);
  constexpr int kSteps = 3;
  const std::vector<int> epochs = {0, 4, 4};  // epoch 0: 75% sparse, so all dense with 4 ranks
  testing::run_ranks(Transport::kInproc, kSize, [&](Context& ctx) {
    Engine engine(ctx, options);
    for (int step = 0; step < kSteps; ++step) {
      engine.set_epoch(epochs[step]);
      std::vector<std::vector<float>> buffers;
      std::vector<Handle> handles;
      for (size_t t = 0; t < kTensorCounts.size(); ++t) {
        buffers.push_back(gradient(ctx.rank(), static_cast<int>(t), step, kTensorCounts[t]));
      }
      for (size_t t = 0; t < kTensorCounts.size(); ++t) {
        handles.push_back(engine.allreduce_async(
            "grad." + std::to_string(t),
            Tensor{buffers[t].data(), DataType::kFloat32, {static_cast<int64_t>(kTensorCounts[t])}},
            ReduceOp::kSum));
      }
      for (Handle& handle : handles) handle.wait();
      std::lock_guard<std::mutex> lock(mutex);
      for (auto& buffer : buffers) results[ctx.rank()].push_back(std::move(buffer));
    }
    stats[ctx.rank()] = engine.stats();
  });
  for (int step = 0; step < kSteps; ++step) {
    for (size_t t = 0; t < kTensorCounts.size(); ++t) {
      const std::vector<float> expected =
          expected_sum(states, options.dgc, kSize, static_cast<int>(t), step, epochs[step]);
      for (int rank = 0; rank < kSize; ++rank) {
        const std::vector<float>& got = results[rank][step * kTensorCounts.size() + t];
        ASSERT_EQ(got.size(), expected.size());
        const bool sparse =
            compression::sends_sparse(options.dgc, kTensorCounts[t], kSize,
                                      compression::sparsity_at(options.dgc, epochs[step]));
        if (sparse) {
          ASSERT_EQ(got, expected) << "step " << step << " tensor " << t << " rank " << rank;
        } else {  // the dense ring adds in its own order
          for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_NEAR(got[i], expected[i], 1e-4f * (1.0f + std::fabs(expected[i])))
                << "step " << step << " tensor " << t << " element " << i;
          }
        }
        ASSERT_EQ(got, results[0][step * kTensorCounts.size() + t])
            << "rank " << rank << " differs from rank 0, step " << step << " tensor " << t;
      }
    }
  }
  // Steps 1 and 2: 50000, 20000 and 4096 go sparse (3 each); step 0 nothing.
  EXPECT_EQ(stats[0].dgc_sparse_tensors, 6u);
  // Bytes contributed: step 0 all dense; steps 1-2 the pairs (8 each) plus the two dense tensors.
  size_t all = 0;
  for (size_t count : kTensorCounts) all += count;
  const size_t pairs = compression::kept_entries(50000, 0.99) +
                       compression::kept_entries(20000, 0.99) +
                       compression::kept_entries(4096, 0.99);
  EXPECT_EQ(stats[0].compressed_bytes, all * 4 + 2 * (pairs * 8 + (10 + 3000) * 4));
  EXPECT_EQ(stats[0].bytes, 3 * all * 4);
}

TEST(EngineDgc, RanksOnDifferentEpochsFailWithMismatch) {
  const auto result = testing::run_ranks_collect(
      Transport::kInproc, 3,
      [](Context& ctx) {
        EngineOptions options = dgc_engine_options();
        options.dgc.warmup = {0.9};
        Engine engine(ctx, options);
        engine.set_epoch(ctx.rank() == 1 ? 0 : 1);  // 90% against 99%: different pair counts
        std::vector<float> values(100000, 1.0f);
        engine
            .allreduce_async("w", Tensor{values.data(), DataType::kFloat32, {100000}},
                             ReduceOp::kAvg)
            .wait();
      },
      10000ms);
  testing::expect_every_rank_failed(result, ErrorCode::kMismatch, "'w'");
}

TEST(EngineDgc, OnlySumsAndAveragesCompress) {
  testing::run_ranks(Transport::kInproc, 2, [](Context& ctx) {
    Engine engine(ctx, dgc_engine_options());
    std::vector<float> values(8, static_cast<float>(ctx.rank()));
    // The engine's default leaves a max alone: it runs uncompressed.
    engine.allreduce_async("max", Tensor{values.data(), DataType::kFloat32, {8}}, ReduceOp::kMax)
        .wait();
    EXPECT_EQ(values, std::vector<float>(8, 1.0f));
    // Asked for by name, it is refused on the submitting rank, naming the tensor.
    Submission submission;
    submission.name = "explicit";
    submission.tensor = Tensor{values.data(), DataType::kFloat32, {8}};
    submission.op = ReduceOp::kMax;
    submission.compression = Compression::kDgc;
    try {
      engine.submit(submission);
      ADD_FAILURE() << "a dgc max was accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find("'explicit'"), std::string::npos) << error.what();
    }
  });
}

// Settings given after the engine started (ringd.torch learns them from Compression.dgc) are
// the ones the DGC buckets run with: their sparsity (the pair count) and their momentum (the
// velocity). Once a DGC tensor has run they are fixed: the same settings again are accepted,
// others refused; settings no rank could run are refused at once.
TEST(EngineDgc, SettingsGivenAfterTheStartApplyAndThenStayFixed) {
  constexpr int kSize = 2;
  DgcOptions settings;
  settings.sparsity = 0.9;
  settings.warmup = {};
  settings.momentum = 0.5f;
  const int tensor = 0;  // 50000 elements: sparse
  const size_t count = kTensorCounts[tensor];
  std::vector<std::vector<compression::DgcTensorState>> states(kSize);
  for (auto& per_rank : states) {
    for (size_t c : kTensorCounts) per_rank.emplace_back(c, settings.momentum);
  }
  std::mutex mutex;
  std::vector<std::vector<std::vector<float>>> results(kSize);
  std::vector<EngineStats> stats(kSize);
  testing::run_ranks(Transport::kInproc, kSize, [&](Context& ctx) {
    Engine engine(ctx, testing::test_engine_options());  // compression none, default DGC settings
    DgcOptions impossible = settings;
    impossible.sparsity = 1.0;
    EXPECT_THROW(engine.set_dgc_options(impossible), Error);
    engine.set_dgc_options(settings);
    for (int step = 0; step < 2; ++step) {
      std::vector<float> buffer = gradient(ctx.rank(), tensor, step, count);
      Submission submission;
      submission.name = "w";
      submission.tensor = Tensor{buffer.data(), DataType::kFloat32, {static_cast<int64_t>(count)}};
      submission.op = ReduceOp::kSum;
      submission.compression = Compression::kDgc;
      engine.submit(submission).wait();
      std::lock_guard<std::mutex> lock(mutex);
      results[ctx.rank()].push_back(std::move(buffer));
    }
    engine.set_dgc_options(settings);  // the same again: fine
    DgcOptions other = settings;
    other.momentum = 0.9f;
    try {
      engine.set_dgc_options(other);
      ADD_FAILURE() << "rank " << ctx.rank() << ": new DGC settings after a DGC tensor ran";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find("cannot change"), std::string::npos) << error.what();
    }
    stats[ctx.rank()] = engine.stats();
  });
  for (int step = 0; step < 2; ++step) {
    const std::vector<float> expected = expected_sum(states, settings, kSize, tensor, step, 0);
    for (int rank = 0; rank < kSize; ++rank) {
      ASSERT_EQ(results[rank][step], expected) << "step " << step << " rank " << rank;
    }
  }
  EXPECT_EQ(stats[0].compressed_bytes, 2 * compression::kept_entries(count, 0.9) * 8);
}

TEST(EngineDgc, SettingsNoRankCouldRunAreRefused) {
  testing::run_ranks(Transport::kInproc, 1, [](Context& ctx) {
    for (double sparsity : {-0.1, 1.0, std::nan("")}) {
      EngineOptions options = dgc_engine_options();
      options.dgc.sparsity = sparsity;
      EXPECT_THROW(Engine(ctx, options), Error) << sparsity;
    }
    EngineOptions options = dgc_engine_options();
    options.dgc.momentum = 1.0f;
    EXPECT_THROW(Engine(ctx, options), Error);
    EXPECT_EQ(parse_compression("dgc"), Compression::kDgc);
    EXPECT_STREQ(compression_name(Compression::kDgc), "dgc");
  });
}

}  // namespace
}  // namespace ringd
