// The flags of every multi-rank command (ringd bench replay, ringd train): where the ranks are
// and how they connect. Kept as one block so the commands cannot drift apart.
#pragma once

#include <string>

#include "job/topology.h"

namespace CLI {
class App;
}

namespace ringd::cli {

// --transport --ranks --rank --size --rendezvous --iface --tcp-port --timeout (the last as text,
// parsed by the caller).
void add_job_options(CLI::App& app, job::TopologyFlags* topology, std::string* interface,
                     int* tcp_port, std::string* timeout_text);

}  // namespace ringd::cli
