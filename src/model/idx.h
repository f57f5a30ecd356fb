// IDX files (the MNIST / Fashion-MNIST format, http://yann.lecun.com/exdb/mnist/): a big-endian
// header, then the data, row-major:
//
//   0x00 0x00 <type> <dims>   type 0x08 = unsigned byte (the only one ringd reads)
//   <dims> x uint32           sizes, big-endian
//   data                      product(sizes) bytes, nothing after
//
// The file may be gzip-compressed (as distributed) or plain; zlib tells them apart. Every check
// failure is a ringd::Error(kInvalidArgument) that names the file and what is wrong with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringd::model {

struct IdxArray {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;  // product(dims) bytes
};

// Reads `path` (gzip or plain). `expected_dims` (1 = labels, 3 = images) is checked against the
// header; `max_items` > 0 keeps only the first max_items entries of the first dimension.
IdxArray read_idx(const std::string& path, size_t expected_dims, size_t max_items = 0);

// Writes an uncompressed IDX file (tests write small data sets with it).
void write_idx(const std::string& path, const std::vector<uint32_t>& dims,
               const std::vector<uint8_t>& data);

}  // namespace ringd::model
