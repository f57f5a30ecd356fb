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

void hierarchical_allreduce(Context& ctx, LocalGroup& group, DeviceBuffers buffers, size_t count,
                            DataType dtype, ReduceOp op, const HierarchyOptions& options) {
  constexpr const char* kWhat = "hierarchical_allreduce";
  ctx.check_usable();
  group.check_buffers(kWhat, buffers, count);
  RINGD_CHECK_ARG(reduce_op_supported(dtype, op),
                  kWhat << " on rank " << ctx.rank() << ": op " << reduce_op_name(op)
                        << " is not defined for " << dtype_name(dtype)
                        << " (avg needs a floating-point type)");
  RINGD_CHECK_ARG(count <= static_cast<size_t>(std::numeric_limits<int64_t>::max()) / 8,
                  kWhat << " on rank " << ctx.rank() << ": count " << count << " is too large");
  const Hierarchy strategy = algo::resolve_strategy(options.strategy, group, kWhat);
  const int nodes = ctx.size();
  const int devices = group.size();
  const size_t piece_bytes = group.staging_piece_bytes();
  const size_t chunk_bytes = algo::pipeline_chunk_bytes(options);
  if (options.check_agreement && nodes > 1) {
    algo::check_agreement(ctx, "hierarchical allreduce",
                          {{"local devices", devices},
                           {"count", static_cast<int64_t>(count)},
                           {"dtype", static_cast<int64_t>(dtype)},
                           {"op", static_cast<int64_t>(op)},
                           {"hierarchy", static_cast<int64_t>(strategy)},
                           {"staging piece bytes", algo::agreed_bytes(piece_bytes)},
                           {"pipeline chunk bytes", algo::agreed_bytes(chunk_bytes)}},
                          options.inter_node);
  }
  if (count == 0) return;

  const bool scale_on_host = op == ReduceOp::kAvg && nodes > 1;
  const ReduceOp combine = scale_on_host ? ReduceOp::kSum : op;
  const double scale = 1.0 / (static_cast<double>(nodes) * devices);
  auto allreduce_piece = [&](void* host, size_t piece_count) {
    allreduce(ctx, host, host, piece_count, dtype, combine, options.inter_node);
    if (scale_on_host) scale_in_place(host, piece_count, dtype, scale);
  };
  // Chunks only pay when there is local work to overlap with the network.
  const std::vector<algo::ElementRange> chunks = nodes > 1 && devices > 1
                                                     ? algo::cut_chunks(count, dtype, chunk_bytes)
                                                     : std::vector<algo::ElementRange>{{0, count}};

  algo::with_hierarchy_context(
      ctx,
      [&] {
        if (strategy == Hierarchy::kRsAg) {
          std::vector<ShardLayout> shards;
          for (const algo::ElementRange& chunk : chunks) {
            shards.push_back(ShardLayout::even(chunk.first, chunk.count, devices));
          }
          algo::run_pipelined(
              chunks.size(),
              [&](size_t c) { group.reduce_scatter(buffers, shards[c], dtype, combine); },
              [&](size_t c) {
                if (nodes == 1) return;
                std::vector<HostPiece> ranges;
                for (int d = 0; d < devices; ++d) {
                  ranges.push_back({d, shards[c].first(d), shards[c].count(d)});
                }
                algo::across_nodes(group, buffers, algo::cut_pieces(ranges, piece_bytes, dtype),
                                   dtype, HostAccess::kReadWrite, allreduce_piece);
              },
              [&](size_t c) { group.allgather(buffers, shards[c], dtype); });
        } else {
          constexpr int kLeader = 0;
          algo::run_pipelined(
              chunks.size(),
              [&](size_t c) {
                group.reduce_to_leader(buffers, chunks[c].first, chunks[c].count, dtype, combine,
                                       kLeader);
              },
              [&](size_t c) {
                if (nodes == 1) return;
                algo::across_nodes(group, buffers,
                                   algo::cut_pieces({{kLeader, chunks[c].first, chunks[c].count}},
                                                    piece_bytes, dtype),
                                   dtype, HostAccess::kReadWrite, allreduce_piece);
              },
              [&](size_t c) {
                group.broadcast_from_leader(buffers, chunks[c].first, chunks[c].count, dtype,
                                            kLeader);
              });
        }
      },
      [&](std::ostream& os) {
        os << "hierarchical allreduce (" << count << " x " << dtype_name(dtype) << " "
           << reduce_op_name(op) << ", " << hierarchy_name(strategy) << ", ";
        algo::describe_shape(os, ctx, group);
        os << ")";
      });
}

}  // namespace ringd
