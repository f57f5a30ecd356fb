// Test harness for hierarchical collectives: N nodes as threads (testing/ranks.h), each with its
// own CpuLocalGroup of L devices and one host buffer per device. Device d of node r is global
// rank r * L + d, which is what the expected values (testing/values.h) are computed over.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "ringd/local_group.h"
#include "testing/ranks.h"

namespace ringd::testing {

// One node's devices and their buffers (`bytes` each, plus one guard byte).
struct NodeDevices {
  std::unique_ptr<LocalGroup> group;
  std::vector<std::vector<unsigned char>> memory;
  std::vector<DeviceBuffer> buffers;

  NodeDevices(int devices, size_t bytes, int threads = 0) {
    CpuLocalGroupOptions options;
    options.threads = threads;
    group = make_cpu_local_group(devices, options);
    memory.resize(static_cast<size_t>(devices));
    for (int d = 0; d < devices; ++d) {
      memory[d].assign(bytes + 1, 0x5A);
      buffers.push_back({memory[d].data(), d});
    }
  }
  int global_rank(const Context& ctx, int device) const {
    return ctx.rank() * group->size() + device;
  }
};

// Runs body(ctx, devices) on `nodes` node threads, each with `devices_per_node(rank)` devices of
// `bytes` each. The first exception is rethrown after every node has finished.
inline RankErrors run_nodes_collect(Transport transport, int nodes,
                                    const std::function<int(int)>& devices_per_node, size_t bytes,
                                    const std::function<void(Context&, NodeDevices&)>& body,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  return run_ranks_collect(
      transport, nodes,
      [&](Context& ctx) {
        NodeDevices node(devices_per_node(ctx.rank()), bytes);
        body(ctx, node);
      },
      timeout);
}

inline void run_nodes(Transport transport, int nodes, int devices, size_t bytes,
                      const std::function<void(Context&, NodeDevices&)>& body) {
  RankErrors result = run_nodes_collect(
      transport, nodes, [devices](int) { return devices; }, bytes, body);
  if (auto e = result.first()) std::rethrow_exception(e);
}

}  // namespace ringd::testing
