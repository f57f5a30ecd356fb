// Hierarchical allreduce: N nodes (one rank each in `ctx`) x L devices (the LocalGroup).
//
// reduce-bcast                                  rs-ag (L = 3; shard d belongs to device d)
//
//  node 0           node 1                       node 0                  node 1
//  d0 d1 d2         d0 d1 d2                     d0    d1    d2          d0    d1    d2
//   \  |  /          \  |  /   1 local reduce    [a..] [.b.] [..c]       [a..] [.b.] [..c]
//    leader           leader     to device 0      1 local reduce-scatter: device d holds shard d
//      |                |                           |     |     |           |     |     |
//      +--- ring -------+      2 allreduce          +-----|-----|- ring ----+     |     |  shard a
//      |  across nodes  |        on the leader            +-----|- ring ----------+     |  shard b
//    leader           leader                                    +- ring ----------------+  shard c
//    /  |  \          /  |  \  3 local broadcast    2 one allreduce per shard across nodes,
//  d0 d1 d2         d0 d1 d2                          one after another on the one Context
//                                                   3 local allgather: every device all shards
//
// The ring across nodes has N steps instead of N x L, and carries the buffer once per node
// (2(N-1)/N of it each way), whatever L is. reduce-bcast puts the whole local reduction on the
// leader's result and the whole network step on one buffer; rs-ag spreads the local work over all
// L devices (on GPUs each reduces and copies 1/L) at the cost of L allreduces across nodes.
//
// Why the shard allreduces run one after another: a Context is driven by one thread, and a pair
// matches messages in FIFO order with the tag checked (transport.h), so two collectives in flight
// on one Context would mismatch. L sub-contexts would mean L connections per neighbour (and, for
// tcp, L I/O threads) on a node with one NIC, which buys nothing here; one ring over the
// concatenated shards needs them contiguous in host memory, which costs a copy of the buffer on
// CPU groups. In sequence, the bytes on the wire are the same as one ring over the whole buffer;
// what is added is (L-1) x the ring's latency, which is why rs-ag loses at small sizes. One rail
// per shard (several NICs, several Contexts) is where running them in parallel would pay.
//
// Pieces: the step across nodes works through group.stage() piece by piece (cpu groups: one
// piece per range, no copy; device groups: pinned-memory pieces, copies overlapping the network).
//
// Chunks (hierarchy_pipeline.h): above HierarchyOptions::pipeline_chunk_bytes the buffer is cut
// into chunks that go through the three steps as a pipeline: while chunk c is on the network, a
// helper thread reduces chunk c+1 and broadcasts (or allgathers) chunk c-1, so the local steps
// cost almost nothing on top of the network step. Each chunk of rs-ag has its own shards.
//
// Parts (hierarchical_allreduce_parts): several buffers' chunks, one after the other, in one
// pipeline, so that the local work and the caller's before/after of one part overlap the network
// step of another (the fusion engine's buckets); hierarchical_allreduce is one part.
//
// avg: the local steps and the allreduce across nodes combine as sum, and each piece is scaled by
// 1/(N x L) once, on the host, before it goes back to the devices, so every device gets the same
// bits. With one node the local group's own avg (1/L) is already that.
#include <limits>
#include <sstream>

#include "allreduce/hierarchy_pipeline.h"
#include "allreduce/hierarchy_steps.h"
#include "common/reduce.h"
#include "ringd/error.h"
#include "ringd/hierarchy.h"

namespace ringd {
namespace {

constexpr const char* kWhat = "hierarchical_allreduce";

// One chunk of one part: what one pipeline step works on.
struct Step {
  size_t part = 0;
  algo::ElementRange range;
  ShardLayout shards;  // rs-ag: the chunk's shard per device
  bool first = false;  // the part's first chunk (runs its `before`)
  bool last = false;   // its last (runs its `after`)
};

void check_part(const Context& ctx, const LocalGroup& group, const HierarchicalPart& part) {
  group.check_buffers(kWhat, part.buffers, part.count);
  RINGD_CHECK_ARG(reduce_op_supported(part.dtype, part.op),
                  kWhat << " on rank " << ctx.rank() << ": op " << reduce_op_name(part.op)
                        << " is not defined for " << dtype_name(part.dtype)
                        << " (avg needs a floating-point type)");
  RINGD_CHECK_ARG(
      part.count <= static_cast<size_t>(std::numeric_limits<int64_t>::max()) / 8,
      kWhat << " on rank " << ctx.rank() << ": count " << part.count << " is too large");
}

}  // namespace

void hierarchical_allreduce(Context& ctx, LocalGroup& group, DeviceBuffers buffers, size_t count,
                            DataType dtype, ReduceOp op, const HierarchyOptions& options) {
  HierarchicalPart part;
  part.buffers.assign(buffers.begin(), buffers.end());
  part.count = count;
  part.dtype = dtype;
  part.op = op;
  hierarchical_allreduce_parts(ctx, group, std::span<const HierarchicalPart>(&part, 1), options);
}

void hierarchical_allreduce_parts(Context& ctx, LocalGroup& group,
                                  std::span<const HierarchicalPart> parts,
                                  const HierarchyOptions& options) {
  ctx.check_usable();
  for (const HierarchicalPart& part : parts) check_part(ctx, group, part);
  const Hierarchy strategy = algo::resolve_strategy(options.strategy, group, kWhat);
  const int nodes = ctx.size();
  const int devices = group.size();
  const size_t piece_bytes = group.staging_piece_bytes();
  const size_t chunk_bytes = algo::pipeline_chunk_bytes(options);
  if (options.check_agreement && nodes > 1) {
    for (const HierarchicalPart& part : parts) {
      algo::check_agreement(ctx, "hierarchical allreduce",
                            {{"local devices", devices},
                             {"parts", static_cast<int64_t>(parts.size())},
                             {"count", static_cast<int64_t>(part.count)},
                             {"dtype", static_cast<int64_t>(part.dtype)},
                             {"op", static_cast<int64_t>(part.op)},
                             {"hierarchy", static_cast<int64_t>(strategy)},
                             {"staging piece bytes", algo::agreed_bytes(piece_bytes)},
                             {"pipeline chunk bytes", algo::agreed_bytes(chunk_bytes)}},
                            options.inter_node);
    }
  }

  // Chunks only pay when there is local work to overlap with the network.
  std::vector<Step> steps;
  for (size_t p = 0; p < parts.size(); ++p) {
    const HierarchicalPart& part = parts[p];
    std::vector<algo::ElementRange> chunks =
        nodes > 1 && devices > 1 ? algo::cut_chunks(part.count, part.dtype, chunk_bytes)
                                 : std::vector<algo::ElementRange>{{0, part.count}};
    if (chunks.empty()) chunks.push_back({0, 0});  // count 0: still its before and after
    for (size_t c = 0; c < chunks.size(); ++c) {
      Step step;
      step.part = p;
      step.range = chunks[c];
      if (strategy == Hierarchy::kRsAg) {
        step.shards = ShardLayout::even(chunks[c].first, chunks[c].count, devices);
      }
      step.first = c == 0;
      step.last = c + 1 == chunks.size();
      steps.push_back(std::move(step));
    }
  }
  if (steps.empty()) return;

  constexpr int kLeader = 0;
  const double scale = 1.0 / (static_cast<double>(nodes) * devices);
  // avg across nodes combines as sum and scales once, on the host.
  auto combine = [&](const HierarchicalPart& part) {
    return part.op == ReduceOp::kAvg && nodes > 1 ? ReduceOp::kSum : part.op;
  };
  auto local_in = [&](size_t s) {
    const Step& step = steps[s];
    const HierarchicalPart& part = parts[step.part];
    if (step.first && part.before) part.before();
    if (step.range.count == 0) return;
    if (strategy == Hierarchy::kRsAg) {
      group.reduce_scatter(part.buffers, step.shards, part.dtype, combine(part));
    } else {
      group.reduce_to_leader(part.buffers, step.range.first, step.range.count, part.dtype,
                             combine(part), kLeader);
    }
  };
  auto across = [&](size_t s) {
    const Step& step = steps[s];
    const HierarchicalPart& part = parts[step.part];
    if (nodes == 1 || step.range.count == 0) return;
    const ReduceOp op = combine(part);
    const bool scale_on_host = part.op == ReduceOp::kAvg;
    std::vector<HostPiece> ranges;
    if (strategy == Hierarchy::kRsAg) {
      for (int d = 0; d < devices; ++d) {
        ranges.push_back({d, step.shards.first(d), step.shards.count(d)});
      }
    } else {
      ranges.push_back({kLeader, step.range.first, step.range.count});
    }
    algo::across_nodes(group, part.buffers, algo::cut_pieces(ranges, piece_bytes, part.dtype),
                       part.dtype, HostAccess::kReadWrite, [&](void* host, size_t count) {
                         allreduce(ctx, host, host, count, part.dtype, op, options.inter_node);
                         if (scale_on_host) scale_in_place(host, count, part.dtype, scale);
                       });
  };
  auto local_out = [&](size_t s) {
    const Step& step = steps[s];
    const HierarchicalPart& part = parts[step.part];
    if (step.range.count > 0) {
      if (strategy == Hierarchy::kRsAg) {
        group.allgather(part.buffers, step.shards, part.dtype);
      } else {
        group.broadcast_from_leader(part.buffers, step.range.first, step.range.count, part.dtype,
                                    kLeader);
      }
    }
    if (step.last && part.after) part.after();
  };

  algo::with_hierarchy_context(
      ctx, [&] { algo::run_pipelined(steps.size(), local_in, across, local_out); },
      [&](std::ostream& os) {
        os << "hierarchical allreduce (";
        if (parts.size() == 1) {
          os << parts[0].count << " x " << dtype_name(parts[0].dtype) << " "
             << reduce_op_name(parts[0].op);
        } else {
          size_t total = 0;
          for (const HierarchicalPart& part : parts) total += part.count;
          os << parts.size() << " parts, " << total << " elements";
        }
        os << ", " << hierarchy_name(strategy) << ", ";
        algo::describe_shape(os, ctx, group);
        os << ")";
      });
}

}  // namespace ringd
