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
//    /  |  \          /  |  \  3 local broadcast    2 across nodes: the shards as ONE ring on
//  d0 d1 d2         d0 d1 d2                          host memory, else one after another
//                                                   3 local allgather: every device all shards
//
// The ring across nodes has N steps instead of N x L, and carries the buffer once per node
// (2(N-1)/N of it each way), whatever L is. reduce-bcast puts the whole local reduction on the
// leader's result and the whole network step on one buffer; rs-ag spreads the local work over all
// L devices (on GPUs each reduces and copies 1/L).
//
// The step across nodes, on host memory (cpu groups: LocalGroup::staging_piece_bytes() is
// unlimited): every range of a pipeline step, in place on the devices' own buffers, as ONE
// allreduce_list — rs-ag's L shards are one ring, the same bytes and latency as reduce-bcast's
// one buffer. On device memory (GPUs) it works through group.stage() piece by piece, in
// pinned-memory pieces whose copies overlap the network, one allreduce per piece: rs-ag's shards
// one after another, (L-1) x the ring's latency more than one ring. A Context is driven by one
// thread and a pair matches messages in FIFO order (transport.h), so they cannot run at once;
// L sub-contexts would mean L connections per neighbour on a node with one NIC. One rail per
// shard (several NICs, several Contexts) is where running them in parallel would pay.
//
// Chunks (hierarchy_pipeline.h): above HierarchyOptions::pipeline_chunk_bytes the buffer is cut
// into chunks that go through the three steps as a pipeline: while chunk c is on the network, a
// helper thread reduces chunk c+1 and broadcasts (or allgathers) chunk c-1, so the local steps
// cost almost nothing on top of the network step. Each chunk of rs-ag has its own shards.
//
// Parts (hierarchical_allreduce_parts): several buffers' chunks, one after the other, in one
// pipeline, so that the local work and the caller's before/after of one part overlap the network
// step of another (the fusion engine's buckets); hierarchical_allreduce is one part. On host
// memory, consecutive parts of one dtype and op are cut into chunks as if they were one buffer
// (a chunk may end in one part and go on in the next), so small parts share a ring instead of
// paying one each (plan_steps below).
//
// avg: the local steps and the allreduce across nodes combine as sum, and each piece is scaled by
// 1/(N x L) once, on the host, before it goes back to the devices, so every device gets the same
// bits. With one node the local group's own avg (1/L) is already that.
#include <limits>
#include <sstream>

#include "allreduce/hierarchy_pipeline.h"
#include "allreduce/hierarchy_steps.h"
#include "allreduce/with_context.h"
#include "common/reduce.h"
#include "ringd/error.h"
#include "ringd/hierarchy.h"

namespace ringd {
namespace {

constexpr const char* kWhat = "hierarchical_allreduce";

// What one pipeline step works on of one part: a range of it, in one chunk.
struct Segment {
  size_t part = 0;
  algo::ElementRange range;
  ShardLayout shards;  // rs-ag: the segment's shard per device
  bool first = false;  // the part's first segment (runs its `before`)
  bool last = false;   // its last (runs its `after`)
};

// One pipeline step: one chunk, made of one part's range or, on host memory, of several
// consecutive parts' ranges that go across nodes as one allreduce_list.
struct Step {
  std::vector<Segment> segments;
};

// avg across nodes combines as sum and scales once, on the host.
ReduceOp combine_op(const HierarchicalPart& part, int nodes) {
  return part.op == ReduceOp::kAvg && nodes > 1 ? ReduceOp::kSum : part.op;
}

// Parts that may share a step across nodes: one dtype, one combining op, one scaling.
bool joinable(const HierarchicalPart& a, const HierarchicalPart& b) {
  return a.dtype == b.dtype && a.op == b.op;
}

Segment make_segment(size_t part, algo::ElementRange range, size_t part_count, Hierarchy strategy,
                     int devices) {
  Segment segment;
  segment.part = part;
  segment.range = range;
  if (strategy == Hierarchy::kRsAg) {
    segment.shards = ShardLayout::even(range.first, range.count, devices);
  }
  segment.first = range.first == 0;
  segment.last = range.first + range.count == part_count;
  return segment;
}

// The pipeline's steps. Not pipelined: one step per part. Pipelined: each part cut into chunks
// of its own. Joined: each run of consecutive joinable parts cut as if it were one buffer, so a
// chunk may end in one part and go on in the next (a part of 0 elements rides in the step where
// it falls, for its before and after). Every node plans the same steps from the same parts.
std::vector<Step> plan_steps(std::span<const HierarchicalPart> parts, Hierarchy strategy,
                             int devices, size_t chunk_bytes, bool pipelined, bool join) {
  std::vector<Step> steps;
  for (size_t begin = 0, end = 0; begin < parts.size(); begin = end) {
    end = begin + 1;
    while (join && end < parts.size() && joinable(parts[begin], parts[end])) ++end;
    size_t total = 0;
    for (size_t p = begin; p < end; ++p) total += parts[p].count;
    std::vector<algo::ElementRange> chunks =
        pipelined ? algo::cut_chunks(total, parts[begin].dtype, chunk_bytes)
                  : std::vector<algo::ElementRange>{{0, total}};
    if (chunks.empty()) chunks.push_back({0, 0});  // nothing to move: still befores and afters
    size_t p = begin;
    size_t used = 0;  // elements of part p in earlier steps
    for (const algo::ElementRange& chunk : chunks) {
      Step step;
      size_t need = chunk.count;
      while (p < end) {
        const size_t left = parts[p].count - used;
        if (left > 0 && need == 0) break;
        const size_t take = std::min(left, need);
        step.segments.push_back(make_segment(p, {used, take}, parts[p].count, strategy, devices));
        used += take;
        need -= take;
        if (used < parts[p].count) break;  // the chunk is full; the part goes on in the next
        ++p;
        used = 0;
      }
      steps.push_back(std::move(step));
    }
  }
  return steps;
}

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

  // Chunks only pay when there is local work to overlap with the network; joining parts only
  // where the step across nodes sees the devices' own memory (one allreduce_list, no staging).
  const bool pipelined = nodes > 1 && devices > 1;
  const bool join = pipelined && piece_bytes == SIZE_MAX;
  const std::vector<Step> steps =
      plan_steps(parts, strategy, devices, chunk_bytes, pipelined, join);
  if (steps.empty()) return;

  constexpr int kLeader = 0;
  const double scale = 1.0 / (static_cast<double>(nodes) * devices);
  auto local_in = [&](size_t s) {
    for (const Segment& segment : steps[s].segments) {
      const HierarchicalPart& part = parts[segment.part];
      if (segment.first && part.before) part.before();
      if (segment.range.count == 0) continue;
      if (strategy == Hierarchy::kRsAg) {
        group.reduce_scatter(part.buffers, segment.shards, part.dtype, combine_op(part, nodes));
      } else {
        group.reduce_to_leader(part.buffers, segment.range.first, segment.range.count, part.dtype,
                               combine_op(part, nodes), kLeader);
      }
    }
  };
  // The host ranges of one segment that go across nodes: the leader's, or every device's shard.
  auto host_ranges = [&](const Segment& segment) {
    std::vector<HostPiece> ranges;
    if (segment.range.count == 0) return ranges;
    if (strategy == Hierarchy::kRsAg) {
      for (int d = 0; d < devices; ++d) {
        ranges.push_back({d, segment.shards.first(d), segment.shards.count(d)});
      }
    } else {
      ranges.push_back({kLeader, segment.range.first, segment.range.count});
    }
    return ranges;
  };
  auto across = [&](size_t s) {
    if (nodes == 1) return;
    const Step& step = steps[s];
    if (join) {
      // Host memory: every range of the step in place, as one ring (steps join only parts of one
      // dtype, combining op and scaling).
      const HierarchicalPart& head = parts[step.segments.front().part];
      std::vector<BufferView> views;
      for (const Segment& segment : step.segments) {
        const HierarchicalPart& part = parts[segment.part];
        const size_t elem = dtype_size(part.dtype);
        for (const HostPiece& range : host_ranges(segment)) {
          if (range.count == 0) continue;
          views.push_back({static_cast<char*>(part.buffers[range.device].data) + range.first * elem,
                           range.count});
        }
      }
      if (views.empty()) return;
      allreduce_list(ctx, views, head.dtype, combine_op(head, nodes), options.inter_node);
      if (head.op == ReduceOp::kAvg) {
        for (const BufferView& view : views) {
          scale_in_place(view.data, view.count, head.dtype, scale);
        }
      }
      return;
    }
    for (const Segment& segment : step.segments) {
      const HierarchicalPart& part = parts[segment.part];
      if (segment.range.count == 0) continue;
      const ReduceOp op = combine_op(part, nodes);
      const bool scale_on_host = part.op == ReduceOp::kAvg;
      algo::across_nodes(group, part.buffers,
                         algo::cut_pieces(host_ranges(segment), piece_bytes, part.dtype),
                         part.dtype, HostAccess::kReadWrite, [&](void* host, size_t count) {
                           allreduce(ctx, host, host, count, part.dtype, op, options.inter_node);
                           if (scale_on_host) scale_in_place(host, count, part.dtype, scale);
                         });
    }
  };
  auto local_out = [&](size_t s) {
    for (const Segment& segment : steps[s].segments) {
      const HierarchicalPart& part = parts[segment.part];
      if (segment.range.count > 0) {
        if (strategy == Hierarchy::kRsAg) {
          group.allgather(part.buffers, segment.shards, part.dtype);
        } else {
          group.broadcast_from_leader(part.buffers, segment.range.first, segment.range.count,
                                      part.dtype, kLeader);
        }
      }
      if (segment.last && part.after) part.after();
    }
  };

  algo::with_context(
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
