// Hierarchical collectives: one ringd process per node drives that node's L devices (a
// LocalGroup); the Context joins the N nodes (one rank per node). Data moves inside the node
// through the LocalGroup and across nodes only between the nodes, so the ring has N steps, not
// N x L, and each node keeps one stream per neighbour instead of L.
//
// The global rank of device d on node r is r * L + d; a hierarchical collective gives the same
// result as the flat collective over those N x L ranks, on every device, bitwise identical.
// Every node must call the same hierarchical collectives in the same order, with the same count,
// dtype, op, strategy and number of devices; by default each call first checks that they agree
// (one small allreduce) and fails with kMismatch naming what differs.
//
// Errors: ringd::Error as everywhere (docs/errors.md); a failure after the argument checks aborts
// the Context so the other nodes learn why.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "ringd/collectives.h"
#include "ringd/local_group.h"
#include "ringd/transport.h"
#include "ringd/types.h"

namespace ringd {

enum class Hierarchy {
  kNone,         // no local step: only valid with one device per node (then the same as flat)
  kReduceBcast,  // local reduce to the leader device -> allreduce across nodes -> local broadcast
  kRsAg,         // local reduce-scatter -> one allreduce per shard across nodes -> local allgather
};

// The default strategy (docs/architecture.md, "The hierarchy", says why).
inline constexpr Hierarchy kDefaultHierarchy = Hierarchy::kReduceBcast;

// "none", "reduce-bcast", "rs-ag".
const char* hierarchy_name(Hierarchy hierarchy);
// Accepts the names above; throws ringd::Error(kInvalidArgument) listing them otherwise.
Hierarchy parse_hierarchy(std::string_view text);

struct HierarchyOptions {
  Hierarchy strategy = kDefaultHierarchy;
  // Check, with one small allreduce across nodes before any data moves, that every node passes
  // the same devices, count, dtype, op, strategy (and root). Off saves that round trip; a
  // mismatch then shows up as kMismatch or kTimeout from the step across nodes, or (different
  // device counts with avg) as a wrong result.
  bool check_agreement = true;
  CollectiveOptions inter_node;  // for the collectives across nodes (algorithm, segments, timeout)
  // Allreduce and broadcast of more than this many bytes are pipelined: cut into chunks of this
  // size, the local steps of neighbouring chunks (on a helper thread) overlap the step across
  // nodes of the current one. 0 = RINGD_HIERARCHY_CHUNK_BYTES (default 4M; there 0 = never);
  // SIZE_MAX = never. Every node must use the same value (checked).
  size_t pipeline_chunk_bytes = 0;
};

// Every device's buffer (count elements) = op over all N x L devices' buffers. kAvg divides once
// by N x L. buffers: one per device of `group`, in device order.
void hierarchical_allreduce(Context& ctx, LocalGroup& group, DeviceBuffers buffers, size_t count,
                            DataType dtype, ReduceOp op, const HierarchyOptions& options = {});

// One of several independent allreduces run as one pipeline (hierarchical_allreduce_parts).
struct HierarchicalPart {
  std::vector<DeviceBuffer> buffers;  // one per device, in device order
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  // Optional: run before the part's first local step and after its last one, on the thread that
  // runs the local steps (not the caller's when there is more than one chunk in all). The fusion
  // engine copies its tensors into and out of the part's buffers there.
  std::function<void()> before;
  std::function<void()> after;
};

// hierarchical_allreduce of every part, as one pipeline: the parts' chunks (each part cut as
// hierarchical_allreduce cuts one buffer) go through the local step in, the step across nodes and
// the local step out in order, and the local work of one chunk, with the parts' before/after,
// overlaps the network step of another. The same results as one call per part, in order.
void hierarchical_allreduce_parts(Context& ctx, LocalGroup& group,
                                  std::span<const HierarchicalPart> parts,
                                  const HierarchyOptions& options = {});

// Every device's buffer = the buffer of device `root_device` on node `root_node`.
void hierarchical_broadcast(Context& ctx, LocalGroup& group, DeviceBuffers buffers, size_t count,
                            DataType dtype, int root_node, int root_device,
                            const HierarchyOptions& options = {});

// In place: every buffer holds N x L x count_per_device elements, and device d of node r has put
// its contribution at element (r * L + d) * count_per_device. Afterwards every device holds all
// contributions. (The strategy does not apply: the node's block is gathered locally, gathered
// across nodes on the leader device, and broadcast locally.)
void hierarchical_allgather(Context& ctx, LocalGroup& group, DeviceBuffers buffers,
                            size_t count_per_device, DataType dtype,
                            const HierarchyOptions& options = {});

}  // namespace ringd
