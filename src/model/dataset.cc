#include "model/dataset.h"

#include <sys/stat.h>

#include <algorithm>

#include "model/idx.h"
#include "model/random.h"
#include "ringd/error.h"

namespace ringd::model {
namespace {

constexpr uint64_t kDataOrderPurpose = 2;  // derive_seed purpose: every epoch's data order

bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

// <dir>/<name>.gz if present, else <dir>/<name>; an error listing both when neither is.
std::string find_file(const std::string& dir, const std::string& name) {
  const std::string plain = dir + "/" + name;
  if (exists(plain + ".gz")) return plain + ".gz";
  if (exists(plain)) return plain;
  RINGD_THROW(kInvalidArgument,
              "data file " << plain << ".gz (or " << plain
                           << ") not found; point --data at a directory with MNIST-style IDX "
                              "files (Debian: apt-get install dataset-fashion-mnist puts them in "
                           << kDefaultDataDir << ")");
}

}  // namespace

Dataset load_idx_dataset(const std::string& dir, const std::string& split, size_t limit) {
  const std::string images_path = find_file(dir, split + "-images-idx3-ubyte");
  const std::string labels_path = find_file(dir, split + "-labels-idx1-ubyte");
  IdxArray images = read_idx(images_path, 3, limit);
  IdxArray labels = read_idx(labels_path, 1, limit);
  if (images.dims[0] != labels.dims[0]) {
    RINGD_THROW(kInvalidArgument, "IDX files disagree: " << images_path << " has " << images.dims[0]
                                                         << " images, " << labels_path << " "
                                                         << labels.dims[0] << " labels");
  }
  Dataset data;
  data.source = images_path;
  data.rows = images.dims[0];
  data.features = size_t{images.dims[1]} * images.dims[2];
  data.pixels = std::move(images.data);
  data.labels.assign(labels.data.begin(), labels.data.end());
  for (int32_t label : data.labels) {
    data.classes = std::max(data.classes, static_cast<size_t>(label) + 1);
  }
  return data;
}

std::vector<uint32_t> epoch_order(size_t rows, uint64_t seed, int64_t epoch) {
  std::vector<uint32_t> order(rows);
  for (size_t i = 0; i < rows; ++i) order[i] = static_cast<uint32_t>(i);
  SplitMix64 random(derive_seed(seed, kDataOrderPurpose, static_cast<uint64_t>(epoch)));
  random.shuffle(order.data(), order.size());
  return order;
}

namespace {

Batch fill(const Dataset& data, const uint32_t* rows, size_t count, std::vector<float>* inputs,
           std::vector<int32_t>* labels) {
  inputs->resize(count * data.features);
  labels->resize(count);
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* pixels = data.pixels.data() + size_t{rows[i]} * data.features;
    float* out = inputs->data() + i * data.features;
    for (size_t f = 0; f < data.features; ++f) out[f] = pixels[f] * (1.0f / 255.0f);
    (*labels)[i] = data.labels[rows[i]];
  }
  return Batch{inputs->data(), labels->data(), count, data.features};
}

}  // namespace

Batch assemble_batch(const Dataset& data, const std::vector<uint32_t>& order, int64_t step,
                     size_t global_batch, int rank, int world_size, std::vector<float>* inputs,
                     std::vector<int32_t>* labels) {
  RINGD_CHECK_ARG(
      world_size > 0 && global_batch % static_cast<size_t>(world_size) == 0,
      "global batch " << global_batch << " does not divide among " << world_size << " ranks");
  const size_t local = global_batch / static_cast<size_t>(world_size);
  const size_t first = static_cast<size_t>(step) * global_batch + static_cast<size_t>(rank) * local;
  RINGD_CHECK_ARG(first + local <= order.size(), "step " << step << " of batch " << global_batch
                                                         << " runs past the " << order.size()
                                                         << " samples of the epoch");
  return fill(data, order.data() + first, local, inputs, labels);
}

Batch assemble_rows(const Dataset& data, size_t first, size_t count, std::vector<float>* inputs,
                    std::vector<int32_t>* labels) {
  RINGD_CHECK_ARG(first + count <= data.rows, "rows " << first << ".." << first + count
                                                      << " are past the " << data.rows
                                                      << " rows of " << data.source);
  std::vector<uint32_t> rows(count);
  for (size_t i = 0; i < count; ++i) rows[i] = static_cast<uint32_t>(first + i);
  return fill(data, rows.data(), count, inputs, labels);
}

}  // namespace ringd::model
