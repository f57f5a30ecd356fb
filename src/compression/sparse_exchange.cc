#include "compression/sparse_exchange.h"

#include <algorithm>
#include <cstring>

#include "ringd/error.h"

namespace ringd::compression {

void sparse_allreduce(Context& ctx, const std::vector<SparseEntry>& mine,
                      const std::vector<size_t>& entry_counts, const std::vector<DenseSlice>& outs,
                      bool average, const CollectiveOptions& options) {
  RINGD_CHECK_ARG(entry_counts.size() == static_cast<size_t>(ctx.size()),
                  "sparse allreduce on rank " << ctx.rank() << ": " << entry_counts.size()
                                              << " entry counts for " << ctx.size() << " ranks");
  RINGD_CHECK_ARG(mine.size() == entry_counts[ctx.rank()], "sparse allreduce on rank "
                                                               << ctx.rank() << ": " << mine.size()
                                                               << " entries, but the counts say "
                                                               << entry_counts[ctx.rank()]);
  std::vector<size_t> byte_counts(entry_counts.size());
  size_t total = 0;
  for (size_t r = 0; r < entry_counts.size(); ++r) {
    byte_counts[r] = entry_counts[r] * sizeof(SparseEntry);
    total += entry_counts[r];
  }
  std::vector<SparseEntry> gathered(total);
  allgatherv(ctx, mine.data(), gathered.data(), byte_counts, DataType::kUInt8, options);

  // starts[s] = the first index of slice s; the last entry is the total.
  std::vector<size_t> starts(outs.size() + 1, 0);
  for (size_t s = 0; s < outs.size(); ++s) {
    starts[s + 1] = starts[s] + outs[s].count;
    if (outs[s].count > 0) std::memset(outs[s].data, 0, outs[s].count * sizeof(float));
  }
  const float scale = average ? 1.0f / static_cast<float>(ctx.size()) : 1.0f;
  size_t next = 0;
  size_t slice = 0;
  for (size_t r = 0; r < entry_counts.size(); ++r) {
    for (size_t e = 0; e < entry_counts[r]; ++e, ++next) {
      const SparseEntry& entry = gathered[next];
      if (entry.index >= starts.back()) {
        RINGD_THROW(kProtocol, "sparse allreduce on rank "
                                   << ctx.rank() << ": rank " << r << " sent index " << entry.index
                                   << " for a tensor of " << starts.back() << " elements");
      }
      // Entries come in ascending order from DGC: the slice is usually this one or the next.
      if (entry.index < starts[slice] || entry.index >= starts[slice + 1]) {
        slice = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), entry.index) -
                                    starts.begin()) -
                1;
      }
      outs[slice].data[entry.index - starts[slice]] += entry.value * scale;
    }
  }
}

void sparse_allreduce(Context& ctx, const std::vector<SparseEntry>& mine,
                      const std::vector<size_t>& entry_counts, float* out, size_t count,
                      bool average, const CollectiveOptions& options) {
  sparse_allreduce(ctx, mine, entry_counts, {DenseSlice{out, count}}, average, options);
}

}  // namespace ringd::compression
