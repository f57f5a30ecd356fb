#include "allreduce/hierarchy_steps.h"

#include <algorithm>
#include <limits>
#include <string>

#include "ringd/error.h"

namespace ringd {

const char* hierarchy_name(Hierarchy hierarchy) {
  switch (hierarchy) {
    case Hierarchy::kNone: return "none";
    case Hierarchy::kReduceBcast: return "reduce-bcast";
    case Hierarchy::kRsAg: return "rs-ag";
  }
  return "?";
}

Hierarchy parse_hierarchy(std::string_view text) {
  if (text == "none") return Hierarchy::kNone;
  if (text == "reduce-bcast") return Hierarchy::kReduceBcast;
  if (text == "rs-ag") return Hierarchy::kRsAg;
  RINGD_THROW(kInvalidArgument,
              "unknown hierarchy '" << text << "'; valid: none reduce-bcast rs-ag");
}

namespace algo {

void check_agreement(Context& ctx, const char* collective,
                     std::initializer_list<AgreedValue> values, const CollectiveOptions& options) {
  const size_t n = values.size();
  std::vector<int64_t> extremes(2 * n);  // [max of v..., max of -v...]
  size_t i = 0;
  for (const AgreedValue& v : values) {
    extremes[i] = v.value;
    extremes[n + i] = -v.value;
    ++i;
  }
  try {
    allreduce(ctx, extremes.data(), extremes.data(), extremes.size(), DataType::kInt64,
              ReduceOp::kMax, options);
  } catch (const Error& error) {  // the allreduce has aborted the context already
    throw Error(error.code(), "rank " + std::to_string(ctx.rank()) + ": " + collective +
                                  " (checking that the nodes agree) failed: " + error.what());
  }
  i = 0;
  for (const AgreedValue& v : values) {
    const int64_t highest = extremes[i], lowest = -extremes[n + i];
    if (highest != lowest) {
      RINGD_THROW(kMismatch, "rank " << ctx.rank() << ": " << collective
                                     << ": the nodes disagree on " << v.name << " (this node: "
                                     << v.value << ", nodes: " << lowest << " to " << highest
                                     << "); every node must call the same hierarchical collective "
                                        "with the same arguments and the same number of devices");
    }
    ++i;
  }
}

int64_t agreed_bytes(size_t bytes) {
  return static_cast<int64_t>(
      std::min<size_t>(bytes, static_cast<size_t>(std::numeric_limits<int64_t>::max())));
}

std::vector<HostPiece> cut_pieces(const std::vector<HostPiece>& ranges, size_t piece_bytes,
                                  DataType dtype) {
  const size_t piece_elems = std::max<size_t>(1, piece_bytes / dtype_size(dtype));
  std::vector<HostPiece> pieces;
  for (const HostPiece& range : ranges) {
    for (size_t done = 0; done < range.count; done += piece_elems) {
      pieces.push_back(
          {range.device, range.first + done, std::min(piece_elems, range.count - done)});
    }
  }
  return pieces;
}

void across_nodes(LocalGroup& group, DeviceBuffers buffers, std::vector<HostPiece> pieces,
                  DataType dtype, HostAccess access,
                  const std::function<void(void* host, size_t count)>& step) {
  std::vector<size_t> counts;
  counts.reserve(pieces.size());
  for (const HostPiece& piece : pieces) counts.push_back(piece.count);
  std::unique_ptr<HostStaging> staging = group.stage(buffers, std::move(pieces), dtype, access);
  for (size_t i = 0; i < counts.size(); ++i) {
    void* host = staging->acquire(i);
    step(host, counts[i]);
    staging->release(i);
  }
  staging->finish();
}

Hierarchy resolve_strategy(Hierarchy strategy, const LocalGroup& group, const char* collective) {
  if (strategy != Hierarchy::kNone) return strategy;
  RINGD_CHECK_ARG(group.size() == 1,
                  collective << ": hierarchy none has no local step, so it needs one device per "
                                "node, not "
                             << group.size()
                             << "; choose reduce-bcast or rs-ag, or run one rank per device");
  return Hierarchy::kReduceBcast;  // with one device the local steps do nothing
}

void describe_shape(std::ostream& os, const Context& ctx, const LocalGroup& group) {
  os << ctx.size() << " nodes x " << group.size() << " " << group.kind() << " devices, "
     << ctx.transport_name();
}

}  // namespace algo
}  // namespace ringd
