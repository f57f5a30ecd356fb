#include "allreduce/plan.h"

#include "common/tunables.h"

namespace ringd::algo {

Resolved resolve(const Context& ctx, const CollectiveOptions& options) {
  const Tunables& t = tunables();
  Resolved r;
  r.segment_bytes = options.segment_bytes ? options.segment_bytes : t.segment_bytes;
  r.segments_in_flight =
      options.segments_in_flight ? options.segments_in_flight : t.segments_in_flight;
  r.small_allreduce_bytes = options.small_threshold_set || options.small_allreduce_bytes
                                ? options.small_allreduce_bytes
                                : t.small_allreduce_bytes;
  r.ring_allreduce_bytes = options.ring_threshold_set || options.ring_allreduce_bytes
                               ? options.ring_allreduce_bytes
                               : t.ring_allreduce_bytes;
  // A threshold the caller chose is kept as it is.
  r.tune_allreduce = t.tune_allreduce && !options.small_threshold_set &&
                     options.small_allreduce_bytes == 0 &&
                     options.algorithm == AllreduceAlgorithm::kAuto;
  r.timeout = options.timeout.count() ? options.timeout : ctx.timeout();
  return r;
}

AllreduceAlgorithm allreduce_by_size(size_t bytes, const Resolved& opts) {
  if (bytes <= opts.small_allreduce_bytes) return AllreduceAlgorithm::kRecursiveDoubling;
  if (bytes <= opts.ring_allreduce_bytes) return AllreduceAlgorithm::kHalvingDoubling;
  return AllreduceAlgorithm::kRing;
}

Chunks::Chunks(size_t count, int parts) : offsets(static_cast<size_t>(parts) + 1) {
  const size_t base = count / parts;
  const size_t extra = count % parts;
  offsets[0] = 0;
  for (int i = 0; i < parts; ++i) {
    offsets[i + 1] = offsets[i] + base + (static_cast<size_t>(i) < extra ? 1 : 0);
  }
}

Chunks::Chunks(const std::vector<size_t>& counts) : offsets(counts.size() + 1) {
  offsets[0] = 0;
  for (size_t i = 0; i < counts.size(); ++i) offsets[i + 1] = offsets[i] + counts[i];
}

}  // namespace ringd::algo
