// Hierarchical broadcast: the root node sends the root device's buffer to the same device of
// every other node (a pipelined chain across nodes, piece by piece through host staging), and
// each node then broadcasts it from that device to its others:
//
//   node root: [d_root] --chain--> node 1: [d_root] --chain--> node 2: [d_root] ...
//                 |                          |                          |
//           local broadcast            local broadcast            local broadcast
//            to d0 .. d(L-1)            to d0 .. d(L-1)            to d0 .. d(L-1)
//
// No reduction, so the strategy does not apply; every device ends with the root's bytes. Above
// HierarchyOptions::pipeline_chunk_bytes the local broadcast of chunk c overlaps the chain of
// chunk c+1 (hierarchy_pipeline.h).
#include <limits>

#include "allreduce/hierarchy_pipeline.h"
#include "allreduce/hierarchy_steps.h"
#include "allreduce/with_context.h"
#include "ringd/error.h"
#include "ringd/hierarchy.h"

namespace ringd {

void hierarchical_broadcast(Context& ctx, LocalGroup& group, DeviceBuffers buffers, size_t count,
                            DataType dtype, int root_node, int root_device,
                            const HierarchyOptions& options) {
  constexpr const char* kWhat = "hierarchical_broadcast";
  ctx.check_usable();
  group.check_buffers(kWhat, buffers, count);
  RINGD_CHECK_ARG(root_node >= 0 && root_node < ctx.size(),
                  kWhat << " on rank " << ctx.rank() << ": root node " << root_node
                        << " is not a node of this job (" << ctx.size() << " nodes)");
  RINGD_CHECK_ARG(root_device >= 0 && root_device < group.size(),
                  kWhat << " on rank " << ctx.rank() << ": root device " << root_device
                        << " is not one of this node's " << group.size() << " devices");
  RINGD_CHECK_ARG(count <= static_cast<size_t>(std::numeric_limits<int64_t>::max()) / 8,
                  kWhat << " on rank " << ctx.rank() << ": count " << count << " is too large");
  const int nodes = ctx.size();
  const size_t piece_bytes = group.staging_piece_bytes();
  const size_t chunk_bytes = algo::pipeline_chunk_bytes(options);
  if (options.check_agreement && nodes > 1) {
    algo::check_agreement(ctx, "hierarchical broadcast",
                          {{"count", static_cast<int64_t>(count)},
                           {"element size", static_cast<int64_t>(dtype_size(dtype))},
                           {"root node", root_node},
                           {"root device", root_device},
                           {"staging piece bytes", algo::agreed_bytes(piece_bytes)},
                           {"pipeline chunk bytes", algo::agreed_bytes(chunk_bytes)}},
                          options.inter_node);
  }
  if (count == 0) return;
  const std::vector<algo::ElementRange> chunks = nodes > 1 && group.size() > 1
                                                     ? algo::cut_chunks(count, dtype, chunk_bytes)
                                                     : std::vector<algo::ElementRange>{{0, count}};

  algo::with_context(
      ctx,
      [&] {
        const bool is_root = ctx.rank() == root_node;
        algo::run_pipelined(
            chunks.size(), [](size_t) {},
            [&](size_t c) {
              if (nodes == 1) return;
              algo::across_nodes(group, buffers,
                                 algo::cut_pieces({{root_device, chunks[c].first, chunks[c].count}},
                                                  piece_bytes, dtype),
                                 dtype, is_root ? HostAccess::kRead : HostAccess::kWrite,
                                 [&](void* host, size_t piece_count) {
                                   broadcast(ctx, host, piece_count, dtype, root_node,
                                             options.inter_node);
                                 });
            },
            [&](size_t c) {
              group.broadcast_from_leader(buffers, chunks[c].first, chunks[c].count, dtype,
                                          root_device);
            });
      },
      [&](std::ostream& os) {
        os << "hierarchical broadcast (" << count << " x " << dtype_name(dtype) << " from node "
           << root_node << " device " << root_device << ", ";
        algo::describe_shape(os, ctx, group);
        os << ")";
      });
}

}  // namespace ringd
