// The pipeline of the hierarchical collectives: a buffer cut into chunks, and each chunk's local
// step in, step across nodes and local step out, run so that the local work on neighbouring
// chunks overlaps the network step on the current one. The local steps run on a helper thread
// (the only thread using the LocalGroup's collectives meanwhile), the steps across nodes on the
// calling thread (the only one using the Context, and the LocalGroup's host staging):
//
//   helper:  in 0 | in 1 | ......... out 0 | in 2 | ... out 1 | in 3 | ... out 2 | ... out 3
//   caller:       | across 0 .............| across 1 ........| across 2 ........| across 3 |
//
//   in c      before across c        (e.g. reduce chunk c to the leader device)
//   across c  after in c             (the allreduce across nodes of chunk c)
//   out c     after across c         (e.g. broadcast chunk c from the leader)
//   the helper runs in c+1 before out c, so it is at most two chunks ahead of the network.
//
// With one chunk everything runs on the calling thread, in order (no thread is started). The
// first exception on either thread stops both (the caller finishes the step across nodes it is
// in) and is rethrown on the calling thread, the helper's first.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "ringd/hierarchy.h"
#include "ringd/types.h"

namespace ringd::algo {

struct ElementRange {
  size_t first = 0;
  size_t count = 0;
};

// [0, count) in consecutive chunks of chunk_bytes (whole elements, at least one); a tail shorter
// than a quarter chunk joins the chunk before it instead of costing a step of its own. Every node
// cuts the same way. count == 0 gives no chunk.
std::vector<ElementRange> cut_chunks(size_t count, DataType dtype, size_t chunk_bytes);

// The chunk size in effect: options.pipeline_chunk_bytes, or the tunable when that is 0; "no
// pipeline" as SIZE_MAX.
size_t pipeline_chunk_bytes(const HierarchyOptions& options);

void run_pipelined(size_t chunks, const std::function<void(size_t)>& local_in,
                   const std::function<void(size_t)>& across,
                   const std::function<void(size_t)>& local_out);

}  // namespace ringd::algo
