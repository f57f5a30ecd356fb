// Image classification data (MNIST-style IDX files) and the order a data-parallel run reads it in.
//
// Data order: epoch e visits the training set in one permutation drawn from (seed, e). Step s of
// the epoch takes the global batch perm[s*B .. (s+1)*B) (B = global batch; a last partial batch is
// dropped) and rank r of W takes its r-th contiguous slice of B/W samples:
//
//   perm of epoch e:  [ 17  3 42  8 | 11 29  5 60 | ... ]     B = 4, W = 2
//   step 0:             r0: 17 3    r1: 42 8
//   step 1:             r0: 11 29   r1: 5 60
//
// So a W-rank run sees exactly the samples, in exactly the groups, of a 1-rank run with batch B,
// and the mean of the ranks' mean gradients is the 1-rank mean gradient. The order depends only
// on (seed, epoch, step), which is what lets a resumed run continue the same sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"

namespace ringd::model {

struct Dataset {
  std::string source;           // where it was read from, for messages
  std::vector<uint8_t> pixels;  // rows x features
  std::vector<int32_t> labels;  // rows
  size_t rows = 0;
  size_t features = 0;
  size_t classes = 0;  // 1 + the largest label
};

// Reads <dir>/<split>-images-idx3-ubyte[.gz] and <dir>/<split>-labels-idx1-ubyte[.gz] (split =
// "train" or "t10k"), keeping the first `limit` samples when limit > 0. Throws kInvalidArgument
// naming the file: missing, malformed, or images and labels that disagree in count.
Dataset load_idx_dataset(const std::string& dir, const std::string& split, size_t limit = 0);

// Where Debian's dataset-fashion-mnist package puts the files.
constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

// The permutation of rows for `epoch`.
std::vector<uint32_t> epoch_order(size_t rows, uint64_t seed, int64_t epoch);

// Fills `inputs` (pixels / 255) and `labels` with rank `rank`'s slice of global batch `step` of
// `order`, and returns the Batch over them. global_batch must divide by world_size.
Batch assemble_batch(const Dataset& data, const std::vector<uint32_t>& order, int64_t step,
                     size_t global_batch, int rank, int world_size, std::vector<float>* inputs,
                     std::vector<int32_t>* labels);

// Rows [first, first + count) in file order (evaluation).
Batch assemble_rows(const Dataset& data, size_t first, size_t count, std::vector<float>* inputs,
                    std::vector<int32_t>* labels);

}  // namespace ringd::model
