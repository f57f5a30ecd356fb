#include "model/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

#include "ringd/error.h"

namespace ringd::model {
namespace {

constexpr uint8_t kUnsignedByte = 0x08;
constexpr uint64_t kMaxBytes = uint64_t{1} << 34;  // 16 GiB: far beyond any IDX data set

struct GzCloser {
  void operator()(gzFile file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads exactly `bytes` or says why not: a short read is a truncated file. When these bytes are a
// piece of a larger part, `before` bytes of it were read already and `whole` is its size (the
// message speaks of the whole part).
void read_exactly(gzFile file, const std::string& path, void* out, size_t bytes, const char* what,
                  uint64_t before = 0, uint64_t whole = 0) {
  auto* cursor = static_cast<uint8_t*>(out);
  size_t done = 0;
  while (done < bytes) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes - done, 1 << 30));
    const int got = gzread(file, cursor + done, chunk);
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      RINGD_THROW(kInvalidArgument, "IDX file "
                                        << path << ": cannot read the " << what << ": "
                                        << (code == Z_ERRNO ? std::strerror(errno) : message)
                                        << " (corrupt or truncated gzip data?)");
    }
    if (got == 0) {
      RINGD_THROW(kInvalidArgument, "IDX file " << path << " is truncated: the " << what
                                                << " needs " << (whole ? whole : bytes)
                                                << " bytes, the file has " << before + done
                                                << "; download it again");
    }
    done += static_cast<size_t>(got);
  }
}

// The data, in pieces of 1 MiB: memory grows with the bytes that arrive, never with what
// a header alone announces (a corrupt or hostile 30-byte file may claim gigabytes).
void read_data(gzFile file, const std::string& path, uint64_t bytes, std::vector<uint8_t>* data) {
  constexpr uint64_t kPiece = uint64_t{1} << 20;  // the vector grows geometrically
  data->clear();
  while (data->size() < bytes) {
    const size_t have = data->size();
    const size_t piece = static_cast<size_t>(std::min(bytes - have, kPiece));
    data->resize(have + piece);
    read_exactly(file, path, data->data() + have, piece, "data", have, bytes);
  }
}

}  // namespace

IdxArray read_idx(const std::string& path, size_t expected_dims, size_t max_items) {
  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) {
    RINGD_THROW(kInvalidArgument, "IDX file " << path
                                              << " cannot be opened: " << std::strerror(errno)
                                              << " (check --data and the file name)");
  }
  uint8_t magic[4];
  read_exactly(file.get(), path, magic, 4, "4-byte header");
  if (magic[0] != 0 || magic[1] != 0) {
    RINGD_THROW(kInvalidArgument, "IDX file " << path
                                              << " does not start with an IDX magic number "
                                                 "(0x00 0x00 type dims): not an IDX file");
  }
  if (magic[2] != kUnsignedByte) {
    RINGD_THROW(kInvalidArgument, "IDX file " << path << " holds data type 0x" << std::hex
                                              << int{magic[2]} << std::dec
                                              << "; ringd reads unsigned bytes (0x08) only");
  }
  if (magic[3] != expected_dims) {
    RINGD_THROW(kInvalidArgument, "IDX file " << path << " has " << int{magic[3]}
                                              << " dimensions, expected " << expected_dims
                                              << (expected_dims == 1 ? " (labels)" : " (images)"));
  }
  IdxArray array;
  uint64_t total = 1;
  for (size_t d = 0; d < expected_dims; ++d) {
    uint8_t be[4];
    read_exactly(file.get(), path, be, 4, "dimension sizes");
    const uint32_t size = (uint32_t{be[0]} << 24) | (uint32_t{be[1]} << 16) |
                          (uint32_t{be[2]} << 8) | uint32_t{be[3]};
    if (size == 0) {
      RINGD_THROW(kInvalidArgument, "IDX file " << path << ": dimension " << d << " is 0");
    }
    total *= size;
    if (total > kMaxBytes) {
      RINGD_THROW(kInvalidArgument, "IDX file " << path << ": the header's sizes make more than "
                                                << kMaxBytes << " bytes; corrupt header");
    }
    array.dims.push_back(size);
  }
  const uint64_t row_bytes = total / array.dims[0];
  const uint64_t keep_rows = max_items > 0 && max_items < array.dims[0] ? max_items : array.dims[0];
  read_data(file.get(), path, row_bytes * keep_rows, &array.data);
  if (keep_rows == array.dims[0]) {
    // Nothing may follow the data: extra bytes mean the header does not describe the file.
    uint8_t extra = 0;
    const int more = gzread(file.get(), &extra, 1);
    if (more != 0) {
      RINGD_THROW(kInvalidArgument, "IDX file "
                                        << path << " has "
                                        << (more > 0 ? "bytes after the data the header describes"
                                                     : "unreadable data after its contents")
                                        << " (header sizes do not match the file: corrupt?)");
    }
  }
  array.dims[0] = static_cast<uint32_t>(keep_rows);
  return array;
}

void write_idx(const std::string& path, const std::vector<uint32_t>& dims,
               const std::vector<uint8_t>& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint8_t magic[4] = {0, 0, kUnsignedByte, static_cast<uint8_t>(dims.size())};
  out.write(reinterpret_cast<const char*>(magic), 4);
  for (uint32_t size : dims) {
    const uint8_t be[4] = {static_cast<uint8_t>(size >> 24), static_cast<uint8_t>(size >> 16),
                           static_cast<uint8_t>(size >> 8), static_cast<uint8_t>(size)};
    out.write(reinterpret_cast<const char*>(be), 4);
  }
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!out) RINGD_THROW(kIo, "cannot write IDX file " << path);
}

}  // namespace ringd::model
