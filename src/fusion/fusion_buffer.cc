#include "fusion/fusion_buffer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/half.h"
#include "ringd/error.h"

namespace ringd::fusion {
namespace {

// Below this many source bytes a copy runs on the calling thread alone; each extra thread gets at
// least this much.
constexpr size_t kBytesPerThread = 256 << 10;

void convert_range(const CopyPiece& piece, size_t first, size_t count, CopyMode mode,
                   Compression compression) {
  if (mode == CopyMode::kPlain) {
    std::memcpy(static_cast<uint8_t*>(piece.dst) + first,
                static_cast<const uint8_t*>(piece.src) + first, count);
    return;
  }
  if (mode == CopyMode::kToCompressed) {
    const float* src = static_cast<const float*>(piece.src) + first;
    uint16_t* dst = static_cast<uint16_t*>(piece.dst) + first;
    if (compression == Compression::kFp16) {
      for (size_t i = 0; i < count; ++i) dst[i] = half::f32_to_f16(src[i]);
    } else {
      for (size_t i = 0; i < count; ++i) dst[i] = half::f32_to_bf16(src[i]);
    }
    return;
  }
  const uint16_t* src = static_cast<const uint16_t*>(piece.src) + first;
  float* dst = static_cast<float*>(piece.dst) + first;
  if (compression == Compression::kFp16) {
    for (size_t i = 0; i < count; ++i) dst[i] = half::f16_to_f32(src[i]);
  } else {
    for (size_t i = 0; i < count; ++i) dst[i] = half::bf16_to_f32(src[i]);
  }
}

}  // namespace

void* FusionBuffer::reserve(size_t bytes) {
  if (bytes <= capacity_ && memory_) return memory_.get();
  const size_t rounded = (std::max<size_t>(bytes, 64) + 63) / 64 * 64;
  memory_.reset();  // free first: the old contents are not needed
  void* memory = std::aligned_alloc(64, rounded);
  if (!memory) {
    RINGD_THROW(kIo, "cannot allocate a " << rounded
                                          << "-byte fusion buffer; lower "
                                             "RINGD_FUSION_THRESHOLD_BYTES");
  }
  memory_ = std::unique_ptr<uint8_t, void (*)(void*)>(static_cast<uint8_t*>(memory), std::free);
  capacity_ = rounded;
  return memory_.get();
}

size_t wire_element_size(DataType dtype, Compression compression) {
  return wire_dtype(dtype, compression) == dtype ? dtype_size(dtype) : 2;
}

DataType wire_dtype(DataType dtype, Compression compression) {
  if (dtype != DataType::kFloat32) return dtype;
  switch (compression) {
    case Compression::kNone: return dtype;
    case Compression::kFp16: return DataType::kFloat16;
    case Compression::kBf16: return DataType::kBFloat16;
    case Compression::kDgc: return dtype;  // pairs of float32 values (executor_dgc.cc)
  }
  return dtype;
}

void ParallelCopier::run(const std::vector<CopyPiece>& pieces, CopyMode mode,
                         Compression compression) {
  size_t total = 0;
  for (const CopyPiece& piece : pieces) total += piece.count;
  if (total == 0) return;
  const size_t unit_bytes = mode == CopyMode::kPlain ? 1 : 4;
  const size_t by_size = std::max<size_t>(1, total * unit_bytes / kBytesPerThread);
  const int threads = static_cast<int>(std::min<size_t>(pool_.size(), by_size));
  // Thread t copies the global element range [t * total / threads, (t + 1) * total / threads).
  const auto copy_share = [&](int t) {
    const size_t begin = total * t / threads;
    const size_t end = total * (t + 1) / threads;
    size_t offset = 0;  // global index of the current piece's first element
    for (const CopyPiece& piece : pieces) {
      const size_t lo = std::max(begin, offset);
      const size_t hi = std::min(end, offset + piece.count);
      if (lo < hi) convert_range(piece, lo - offset, hi - lo, mode, compression);
      offset += piece.count;
      if (offset >= end) break;
    }
  };
  if (threads == 1) {
    copy_share(0);
  } else {
    pool_.run(threads, copy_share);
  }
}

}  // namespace ringd::fusion
