#include "launcher/topology.h"

#include <unistd.h>

#include <climits>
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
  return [](const char* name) -> const char* {
    const char* value = std::getenv(name);
    if (value || std::string(name) != "HOSTNAME") return value;
    static char hostname[HOST_NAME_MAX + 1] = {};
    if (!hostname[0] && ::gethostname(hostname, sizeof(hostname) - 1) != 0) return nullptr;
    return hostname;
  };
}

namespace {

// Whether the StatefulSet inputs speak: replicas or a pod name given explicitly.
bool statefulset_given(const TopologyFlags& flags, const EnvLookup& env) {
  return flags.replicas != -1 || !flags.pod_name.empty() || env("RINGD_REPLICAS") != nullptr;
}

// Rank = ordinal, size = replicas; --rank/--size, when given too, must say the same.
void apply_pod_identity(const TopologyFlags& flags, Topology* topology) {
  const PodIdentity& pod = topology->pod;
  const std::string name = pod.set_name + "-" + std::to_string(pod.ordinal);
  if (flags.rank != -1 && flags.rank != pod.ordinal) {
    RINGD_THROW(kInvalidArgument, "--rank " << flags.rank << " disagrees with pod " << name
                                            << " (ordinal " << pod.ordinal
                                            << "); drop --rank in a StatefulSet");
  }
  if (flags.size != -1 && flags.size != pod.replicas) {
    RINGD_THROW(kInvalidArgument, "--size " << flags.size << " disagrees with the StatefulSet's "
                                            << pod.replicas
                                            << " replicas (--replicas / RINGD_REPLICAS)");
  }
  topology->rank = pod.ordinal;
  topology->size = pod.replicas;
}

}  // namespace

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
    // Under mpirun Open MPI decides the rank (several slots per pod make rank != ordinal); the pod
    // is resolved only when asked for on the command line, and then only to name the pods.
    if (flags.replicas != -1 || !flags.pod_name.empty()) {
      topology.pod = resolve_pod_identity(flags, env);
    }
  } else if (statefulset_given(flags, env)) {
    topology.pod = resolve_pod_identity(flags, env);
    apply_pod_identity(flags, &topology);
    if (topology.transport == "mpi" && topology.size > 1) {
      RINGD_THROW(kInvalidArgument,
                  "--transport mpi needs mpirun to start the ranks; in a StatefulSet without "
                  "mpirun use --transport tcp (rendezvous at pod 0)");
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
  } else if (uses_store && topology.size > 1 && topology.pod.ordinal >= 0) {
    // Standalone in a StatefulSet: pod 0 serves the store at its stable DNS name.
    topology.rendezvous_host = pod_dns_name(topology.pod, 0);
    topology.rendezvous_port = kDefaultRendezvousPort;
  } else if (uses_store && topology.size > 1 && !(topology.under_mpirun && have_mpi)) {
    RINGD_THROW(kInvalidArgument, "rank " << topology.rank << " of " << topology.size
                                          << ": --rendezvous host:port is required (rank 0 serves "
                                             "the rendezvous store there)");
  }
  return topology;
}

}  // namespace ringd::launcher
