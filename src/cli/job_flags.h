// The flags of every multi-rank command (ringd bench replay, ringd train): where the ranks are
// and how they connect. Kept as one block so the commands cannot drift apart.
#pragma once

#include <optional>
#include <string>

#include "job/topology.h"
#include "ringd/engine.h"
#include "ringd/hierarchy.h"

namespace CLI {
class App;
}

namespace ringd::cli {

// --transport --ranks --rank --size --rendezvous --iface --tcp-port --timeout (the last as text,
// parsed by the caller).
void add_job_options(CLI::App& app, job::TopologyFlags* topology, std::string* interface,
                     int* tcp_port, std::string* timeout_text);

// --local-devices L --hierarchy H (train, bench replay): this process is one node whose fusion
// engine runs over L devices (EngineOptions::local_group). The hierarchy is kept as text; after
// parsing, local_hierarchy() turns it into the strategy and refuses what cannot run over
// devices (--hierarchy without a group, dgc over several devices), throwing
// CLI::ValidationError. group_of_one: one device still makes a group (bench replay --gpus), so
// --hierarchy means something with --local-devices 1.
void add_local_device_options(CLI::App& app, int* devices, std::string* hierarchy_text);
Hierarchy local_hierarchy(int devices, const std::string& hierarchy_text,
                          const std::optional<Compression>& compression, bool group_of_one = false);
// --gpus (train, bench replay): refuses, with CLI::ValidationError, a build without NCCL and
// --compression other than none (GPU buffers are not copied into fusion buffers).
void check_gpus_flag(const std::optional<Compression>& compression);

}  // namespace ringd::cli
