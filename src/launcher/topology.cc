#include "launcher/topology.h"

#include <cstdlib>
#include <string>

#include "ringd/error.h"

namespace ringd::launcher {
namespace {

// A non-negative decimal integer, or -1.
int parse_non_negative(const char* text) {
  if (!text || !*text) return -1;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 1 << 30) return -1;
  return static_cast<int>(value);
}

}  // namespace

EnvLookup process_environment() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

void parse_host_port(const std::string& flag, const std::string& text, std::string* host,
                     uint16_t* port) {
  std::string host_part;
  std::string port_part;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close != std::string::npos && close + 1 < text.size() && text[close + 1] == ':') {
      host_part = text.substr(1, close - 1);
      port_part = text.substr(close + 2);
    }
  } else {
    const size_t colon = text.rfind(':');
    if (colon != std::string::npos && text.find(':') == colon) {
      host_part = text.substr(0, colon);
      port_part = text.substr(colon + 1);
    }
  }
  const int value = parse_non_negative(port_part.c_str());
  if (host_part.empty() || value <= 0 || value > 65535) {
    RINGD_THROW(kInvalidArgument,
                flag << " " << text << " is not host:port (e.g. 127.0.0.1:29500, [::1]:29500)");
  }
  *host = host_part;
  *port = static_cast<uint16_t>(value);
}

Topology resolve_topology(const TopologyFlags& flags, const EnvLookup& env, bool have_mpi) {
  Topology topology;
  const char* env_rank = env("OMPI_COMM_WORLD_RANK");
  const char* env_size = env("OMPI_COMM_WORLD_SIZE");
  topology.under_mpirun = env_rank != nullptr && env_size != nullptr;

  topology.transport = flags.transport;
  if (topology.transport.empty())
    topology.transport = topology.under_mpirun && have_mpi ? "mpi" : "tcp";
  if (topology.transport != "tcp" && topology.transport != "mpi" &&
      topology.transport != "inproc" && topology.transport != "ibverbs") {
    RINGD_THROW(kInvalidArgument,
                "--transport " << topology.transport << " is not one of tcp, mpi, ibverbs, inproc");
  }
  if (topology.transport == "mpi" && !have_mpi) {
    RINGD_THROW(kUnavailable,
                "--transport mpi: this ringd was built without MPI (reconfigure "
                "with -DRINGD_WITH_MPI=ON and Open MPI installed), use tcp");
  }
  if (flags.inproc_ranks != -1 && topology.transport != "inproc") {
    RINGD_THROW(kInvalidArgument, "--ranks " << flags.inproc_ranks
                                             << " is only for --transport inproc (threads of one "
                                                "process); use mpirun -np or --rank/--size");
  }

  if (topology.transport == "inproc") {
    if (flags.rank != -1 || flags.size != -1 || !flags.rendezvous.empty()) {
      RINGD_THROW(kInvalidArgument,
                  "--rank/--size/--rendezvous do not apply to --transport inproc; use --ranks N");
    }
    topology.size = flags.inproc_ranks == -1 ? 1 : flags.inproc_ranks;
    if (topology.size < 1) RINGD_THROW(kInvalidArgument, "--ranks must be at least 1");
    topology.rank = 0;
    return topology;
  }

  if (topology.under_mpirun) {
    topology.rank = parse_non_negative(env_rank);
    topology.size = parse_non_negative(env_size);
    if (topology.size < 1 || topology.rank < 0 || topology.rank >= topology.size) {
      RINGD_THROW(kInvalidArgument, "OMPI_COMM_WORLD_RANK=" << env_rank
                                                            << " OMPI_COMM_WORLD_SIZE=" << env_size
                                                            << " is not a valid rank and size");
    }
    if ((flags.rank != -1 && flags.rank != topology.rank) ||
        (flags.size != -1 && flags.size != topology.size)) {
      RINGD_THROW(kInvalidArgument, "--rank/--size contradict mpirun (rank "
                                        << topology.rank << " of " << topology.size
                                        << "); drop them under mpirun");
    }
  } else {
    if ((flags.rank == -1) != (flags.size == -1)) {
      RINGD_THROW(kInvalidArgument, "give --rank and --size together (or launch with mpirun)");
    }
    if (flags.size != -1) {
      if (flags.size < 1) RINGD_THROW(kInvalidArgument, "--size must be at least 1");
      if (flags.rank < 0 || flags.rank >= flags.size) {
        RINGD_THROW(kInvalidArgument,
                    "--rank " << flags.rank << " is outside 0.." << flags.size - 1);
      }
      topology.rank = flags.rank;
      topology.size = flags.size;
    }
    if (topology.transport == "mpi" && topology.size > 1) {
      RINGD_THROW(kInvalidArgument,
                  "--transport mpi needs mpirun to start the ranks; without "
                  "mpirun use --transport tcp with --rendezvous");
    }
  }

  // tcp and ibverbs find their peers through the rendezvous store (MPI's, under mpirun).
  const bool uses_store = topology.transport == "tcp" || topology.transport == "ibverbs";
  if (!flags.rendezvous.empty()) {
    if (!uses_store) {
      RINGD_THROW(kInvalidArgument, "--rendezvous is only used by --transport tcp and ibverbs");
    }
    parse_host_port("--rendezvous", flags.rendezvous, &topology.rendezvous_host,
                    &topology.rendezvous_port);
  } else if (uses_store && topology.size > 1 && !(topology.under_mpirun && have_mpi)) {
    RINGD_THROW(kInvalidArgument, "rank " << topology.rank << " of " << topology.size
                                          << ": --rendezvous host:port is required (rank 0 serves "
                                             "the rendezvous store there)");
  }
  return topology;
}

}  // namespace ringd::launcher
