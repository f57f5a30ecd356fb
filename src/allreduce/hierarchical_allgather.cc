// Hierarchical allgather, in place. Every buffer holds N x L blocks of `count` elements; block
// r*L + d is device d of node r's contribution:
//
//   1 local allgather:   node r's L blocks -> every device of node r      [ . . |r0 r1 r2| . . ]
//   2 allgather across nodes on device 0 (the node's L blocks as one)    [n0 blocks|n1|...|nN]
//   3 local broadcast of the other nodes' blocks from device 0
//
// The step across nodes is one flat allgather over the whole buffer, staged as one piece (an
// allgather cut into pieces would need a strided layout per piece).
#include <limits>

#include "allreduce/hierarchy_steps.h"
#include "allreduce/with_context.h"
#include "ringd/error.h"
#include "ringd/hierarchy.h"

namespace ringd {

void hierarchical_allgather(Context& ctx, LocalGroup& group, DeviceBuffers buffers,
                            size_t count_per_device, DataType dtype,
                            const HierarchyOptions& options) {
  constexpr const char* kWhat = "hierarchical_allgather";
  ctx.check_usable();
  const int nodes = ctx.size(), devices = group.size();
  RINGD_CHECK_ARG(
      count_per_device <= static_cast<size_t>(std::numeric_limits<int64_t>::max()) / 8 /
                              static_cast<size_t>(nodes * devices),
      kWhat << " on rank " << ctx.rank() << ": count " << count_per_device << " is too large");
  const size_t node_block = count_per_device * devices;
  const size_t total = node_block * nodes;
  group.check_buffers(kWhat, buffers, total);
  if (options.check_agreement && nodes > 1) {
    algo::check_agreement(ctx, "hierarchical allgather",
                          {{"local devices", devices},
                           {"count per device", static_cast<int64_t>(count_per_device)},
                           {"element size", static_cast<int64_t>(dtype_size(dtype))}},
                          options.inter_node);
  }
  if (count_per_device == 0) return;

  algo::with_context(
      ctx,
      [&] {
        const size_t own_first = node_block * ctx.rank();
        group.allgather(buffers, ShardLayout::even(own_first, node_block, devices), dtype);
        if (nodes == 1) return;
        constexpr int kLeader = 0;
        algo::across_nodes(group, buffers, {{kLeader, 0, total}}, dtype, HostAccess::kReadWrite,
                           [&](void* host, size_t) {
                             char* out = static_cast<char*>(host);
                             allgather(ctx, out + own_first * dtype_size(dtype), out, node_block,
                                       dtype, options.inter_node);
                           });
        group.broadcast_from_leader(buffers, 0, own_first, dtype, kLeader);
        group.broadcast_from_leader(buffers, own_first + node_block, total - own_first - node_block,
                                    dtype, kLeader);
      },
      [&](std::ostream& os) {
        os << "hierarchical allgather (" << count_per_device << " x " << dtype_name(dtype)
           << " per device, ";
        algo::describe_shape(os, ctx, group);
        os << ")";
      });
}

}  // namespace ringd
