// Shared plumbing of the collective algorithms: resolved options, chunk/segment arithmetic and
// the per-operation state (context, operation id, timeout).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringd/collectives.h"
#include "ringd/transport.h"
#include "ringd/types.h"

namespace ringd::algo {

struct Resolved {
  size_t segment_bytes;
  size_t segments_in_flight;
  size_t small_allreduce_bytes;
  size_t ring_allreduce_bytes;
  bool tune_allreduce;  // kAuto measures rd against hd per size class (allreduce_tuner.h)
  std::chrono::milliseconds timeout;
};
Resolved resolve(const Context& ctx, const CollectiveOptions& options);

// The fixed rule of AllreduceAlgorithm::kAuto: recursive doubling up to small_allreduce_bytes,
// halving-doubling up to ring_allreduce_bytes, the ring above (the tuner may override the first
// two: allreduce_tuner.h).
AllreduceAlgorithm allreduce_by_size(size_t bytes, const Resolved& opts);

// What one collective call needs from its surroundings.
struct Operation {
  Context& ctx;
  uint64_t id;  // from ctx.next_operation_id(), the same on every rank
  Resolved opts;
  // What every rank must agree on (common/collective_signature.h), in every message's tag.
  uint16_t signature = 0;
  uint64_t tag(uint64_t index) const { return make_tag(id, index, signature); }
  void wait(Request& request) const { request.wait(opts.timeout); }
};

// Splits `count` elements into `parts` contiguous chunks whose sizes differ by at most one
// (the first count % parts chunks get the extra element).
struct Chunks {
  Chunks(size_t count, int parts);
  explicit Chunks(const std::vector<size_t>& counts);  // chunk i holds counts[i] elements
  size_t offset(int chunk) const { return offsets[chunk]; }
  size_t count(int chunk) const { return offsets[chunk + 1] - offsets[chunk]; }
  std::vector<size_t> offsets;  // parts + 1 entries
};

// Number of segments of at most `segment_elems` elements that cover `count` elements.
inline size_t segments_of(size_t count, size_t segment_elems) {
  return (count + segment_elems - 1) / segment_elems;
}

inline int mod(int value, int n) { return ((value % n) + n) % n; }

}  // namespace ringd::algo
