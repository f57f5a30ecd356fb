// What users and launchers configure ringd with: the values of flags and RINGD_* variables
// (sizes, durations, addresses, layer lists, ...) and the environment a launcher sets (rank and
// size from mpirun or torchrun, a StatefulSet's pod name and replicas). Input: a selector byte,
// then the text; selector 0 reads the text as NAME=VALUE lines of an environment.
#include <cstdlib>
#include <map>

#include "common/tunables.h"
#include "fuzz_support.h"
#include "job/topology.h"
#include "model/mlp.h"
#include "model/replay_schedule.h"
#include "net/socket.h"
#include "ps/shard_map.h"
#include "ps/worker_job.h"
#include "ringd/error.h"
#include "runners/bench_config.h"

using namespace ringd;

namespace {

void topology(const std::string& text) {
  std::map<std::string, std::string> variables;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    const size_t equals = line.find('=');
    if (equals != std::string::npos) variables[line.substr(0, equals)] = line.substr(equals + 1);
    start = end + 1;
  }
  const job::EnvLookup env = [&variables](const char* name) -> const char* {
    const auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  };
  for (const bool have_mpi : {false, true}) {
    try {
      const job::Topology topology = job::resolve_topology(job::TopologyFlags{}, env, have_mpi);
      if (topology.rank < 0 || topology.rank >= topology.size) std::abort();
    } catch (const Error&) {
    }
  }
  try {
    job::resolve_pod_identity(job::TopologyFlags{}, env);
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(fuzz::as_text(data + 1, size - 1));
  try {
    switch (data[0] % 11) {
      case 0: topology(text); break;
      case 1: parse_bytes("RINGD_X", text); break;
      case 2: parse_seconds("RINGD_X", text); break;
      case 3: parse_log_level(text); break;
      case 4: {
        std::string host;
        uint16_t port = 0;
        job::parse_host_port("--rendezvous", text, &host, &port);
        break;
      }
      case 5: net::parse_endpoint(text, "an address"); break;
      case 6: ps::parse_shard_policy("--shard-policy", text); break;
      case 7: model::parse_layer_sizes(text); break;
      case 8: model::parse_compute_spread(text); break;
      case 9: ps::parse_server_list("--servers", text); break;
      default: runners::parse_collective(text);
    }
  } catch (const Error&) {
  }
  return 0;
}
