// What `ringd bench <collective>` was asked to do, after flag parsing (cli.cc) and before the
// process knows its place in the job (topology.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "job/topology.h"
#include "ringd/collectives.h"
#include "ringd/hierarchy.h"
#include "ringd/types.h"

namespace ringd::runners {

enum class Collective { kAllreduce, kBroadcast, kAllgather, kReduceScatter };

// "allreduce", "broadcast", "allgather", "reducescatter".
const char* collective_name(Collective collective);
// Throws ringd::Error(kInvalidArgument) listing the valid names.
Collective parse_collective(const std::string& text);
// Whether the collective combines values with a ReduceOp (allreduce, reducescatter).
bool collective_reduces(Collective collective);

struct BenchConfig {
  Collective collective = Collective::kAllreduce;
  size_t min_bytes = 4 << 10;
  size_t max_bytes = 64 << 20;
  size_t step_factor = 4;
  int iters = 20;
  int warmup = 5;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  bool check = false;
  bool in_place = false;
  std::string json_path;  // empty = no JSON
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  size_t segment_bytes = 0;              // 0 = RINGD_SEGMENT_BYTES
  std::chrono::milliseconds timeout{0};  // 0 = RINGD_TIMEOUT
  std::string interface;                 // tcp: listen on / advertise this interface
  int tcp_port = 0;                      // tcp: this rank's listening port (0 = any)
  job::TopologyFlags topology;
  // Devices per node (CPU devices: host buffers of this process) and how a collective spans them
  // (ringd/hierarchy.h). kNone with one device is the flat collective.
  int local_devices = 1;
  Hierarchy hierarchy = Hierarchy::kNone;
};

// Whether the run goes through the hierarchical collectives (more than one device, or a
// hierarchy asked for explicitly).
inline bool bench_is_hierarchical(const BenchConfig& config) {
  return config.local_devices > 1 || config.hierarchy != Hierarchy::kNone;
}

}  // namespace ringd::runners
