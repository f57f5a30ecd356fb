// Building blocks shared by the hierarchical collectives (ringd/hierarchy.h): the agreement check
// across nodes, the step across nodes through the LocalGroup's host staging, and error context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <ostream>
#include <vector>

#include "ringd/hierarchy.h"

namespace ringd::algo {

// One value that every node must pass identically, and what to call it in an error.
struct AgreedValue {
  const char* name;
  int64_t value;
};

// One allreduce (max of every value and of its negation) across the nodes of `ctx`; when any
// value differs between nodes, every node throws kMismatch naming it, with this node's value and
// the range seen. Streams stay in step, so the context remains usable after a disagreement.
void check_agreement(Context& ctx, const char* collective,
                     std::initializer_list<AgreedValue> values, const CollectiveOptions& options);

// A byte count as an agreed value (SIZE_MAX, "unlimited", becomes INT64_MAX).
int64_t agreed_bytes(size_t bytes);

// `ranges` (parts of device buffers) cut into pieces of at most `piece_bytes`; empty ranges are
// dropped. Every node cuts the same ranges the same way, so the pieces match across nodes.
std::vector<HostPiece> cut_pieces(const std::vector<HostPiece>& ranges, size_t piece_bytes,
                                  DataType dtype);

// The step across nodes: for each piece in order, `step(host, count)` on host memory that holds
// the piece (the buffers themselves for cpu groups, staged copies for device groups), then the
// piece is written back as `access` says.
void across_nodes(LocalGroup& group, DeviceBuffers buffers, std::vector<HostPiece> pieces,
                  DataType dtype, HostAccess access,
                  const std::function<void(void* host, size_t count)>& step);

// kNone is only meaningful with one device; throws kInvalidArgument otherwise.
Hierarchy resolve_strategy(Hierarchy strategy, const LocalGroup& group, const char* collective);

// "N nodes x L cpu devices, tcp": for error messages.
void describe_shape(std::ostream& os, const Context& ctx, const LocalGroup& group);

}  // namespace ringd::algo
