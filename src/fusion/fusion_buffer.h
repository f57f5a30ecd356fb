// The fusion buffer and the copies into and out of it.
//
// FusionBuffer: one 64-byte aligned allocation per engine that grows to the largest bucket and is
// then reused, never reallocated per cycle.
//
// ParallelCopier: copies a bucket's tensors into the buffer (or back) with a few threads. The
// pieces are laid end to end and cut into equal element ranges, one per thread, so one big tensor
// is split as evenly as many small ones:
//
//   tensors:  |--a--|-------b--------|-c-|---d---|
//   threads:  |--- t0 ---|--- t1 ---|--- t2 ---|        (t0 is the calling thread)
//
// A copy may convert float32 <-> fp16/bf16 on the way (wire compression). Small copies stay on
// the calling thread: waking a thread costs more than copying a few hundred kilobytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "device/worker_pool.h"
#include "ringd/engine.h"

namespace ringd::fusion {

class FusionBuffer {
 public:
  // At least `bytes` long; the contents are not kept when it grows.
  void* reserve(size_t bytes);
  size_t capacity() const { return capacity_; }

 private:
  std::unique_ptr<uint8_t, void (*)(void*)> memory_{nullptr, nullptr};
  size_t capacity_ = 0;
};

enum class CopyMode {
  kPlain,           // bytes as they are (count = bytes)
  kToCompressed,    // float32 -> fp16/bf16 (count = elements)
  kFromCompressed,  // fp16/bf16 -> float32 (count = elements)
};

struct CopyPiece {
  const void* src;
  void* dst;
  size_t count;  // bytes for kPlain, elements otherwise
};

class ParallelCopier {
 public:
  explicit ParallelCopier(int threads) : pool_(threads) {}
  void run(const std::vector<CopyPiece>& pieces, CopyMode mode, Compression compression);

 private:
  device::WorkerPool pool_;
};

// Element size of the wire format (2 for fp16/bf16, else dtype_size(dtype)).
size_t wire_element_size(DataType dtype, Compression compression);
DataType wire_dtype(DataType dtype, Compression compression);

}  // namespace ringd::fusion
