#include "job/topology.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "common/sha256.h"
#include "common/text.h"
#include "ringd/error.h"

namespace ringd::job {
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

// The variables a launcher sets for each process it starts.
struct LauncherVariables {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};
constexpr LauncherVariables kMpirunVariables{"mpirun", "OMPI_COMM_WORLD_RANK",
                                             "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                             "OMPI_COMM_WORLD_LOCAL_SIZE"};
constexpr LauncherVariables kTorchrunVariables{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                                               "LOCAL_WORLD_SIZE"};

// A rank and a size from two variables. Both unset: false (or, when `required`, an error); one
// set without the other, or values that are not a rank inside the size: kInvalidArgument naming
// both variables and their values.
bool read_rank_and_size(const EnvLookup& env, const char* rank_name, const char* size_name,
                        bool required, int* rank, int* size) {
  const char* rank_text = env(rank_name);
  const char* size_text = env(size_name);
  if (!rank_text && !size_text && !required) return false;
  *rank = parse_non_negative(rank_text);
  *size = parse_non_negative(size_text);
  if (*size < 1 || *rank < 0 || *rank >= *size) {
    RINGD_THROW(kInvalidArgument, rank_name << "=" << (rank_text ? rank_text : "(unset)") << " "
                                            << size_name << "="
                                            << (size_text ? size_text : "(unset)")
                                            << " is not a valid rank and size");
  }
  return true;
}

// torchrun's rank 0 host (MASTER_ADDR), at RINGD_RENDEZVOUS_PORT or MASTER_PORT + 1.
void torchrun_rendezvous(const EnvLookup& env, Topology* topology) {
  const char* host = env("MASTER_ADDR");
  const char* own_port = env("RINGD_RENDEZVOUS_PORT");
  const char* master_port = env("MASTER_PORT");
  if (!host || !*host) {
    RINGD_THROW(kInvalidArgument, "rank " << topology->rank << " of " << topology->size
                                          << " under torchrun: MASTER_ADDR is not set (or give "
                                             "--rendezvous host:port)");
  }
  int port = -1;
  std::string from;
  if (own_port) {
    port = parse_non_negative(own_port);
    from = std::string("RINGD_RENDEZVOUS_PORT=") + own_port;
  } else if (master_port) {
    const int torch_port = parse_non_negative(master_port);
    port = torch_port < 0 ? -1 : torch_port + kTorchrunPortOffset;
    from = std::string("MASTER_PORT=") + master_port + " + " + std::to_string(kTorchrunPortOffset);
  } else {
    from = "MASTER_PORT (unset)";
  }
  if (port <= 0 || port > 65535) {
    RINGD_THROW(kInvalidArgument, "rank " << topology->rank << " under torchrun: " << from
                                          << " is not a port for ringd's rendezvous (set "
                                             "RINGD_RENDEZVOUS_PORT or --rendezvous)");
  }
  topology->rendezvous_host = host;
  topology->rendezvous_port = static_cast<uint16_t>(port);
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
  topology.under_mpirun =
      env(kMpirunVariables.rank) != nullptr && env(kMpirunVariables.size) != nullptr;
  topology.under_torchrun = !topology.under_mpirun && env(kTorchrunVariables.rank) != nullptr &&
                            env(kTorchrunVariables.size) != nullptr;

  // --transport, else RINGD_TRANSPORT, else mpi under mpirun (when built in), else tcp.
  topology.transport = flags.transport;
  std::string transport_given = "--transport " + flags.transport;  // for the error below
  const char* env_transport = env("RINGD_TRANSPORT");
  if (topology.transport.empty() && env_transport && *env_transport) {
    topology.transport = env_transport;
    transport_given = std::string("RINGD_TRANSPORT=") + env_transport;
  }
  if (topology.transport.empty())
    topology.transport = topology.under_mpirun && have_mpi ? "mpi" : "tcp";
  if (topology.transport != "tcp" && topology.transport != "mpi" &&
      topology.transport != "inproc" && topology.transport != "ibverbs") {
    RINGD_THROW(kInvalidArgument, transport_given << " is not one of tcp, mpi, ibverbs, inproc");
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
    topology.under_mpirun = false;
    topology.under_torchrun = false;
    topology.source = "inproc";
    return topology;
  }

  if (topology.under_mpirun || topology.under_torchrun) {
    // The launcher decides the rank (several slots per pod make rank != ordinal).
    const LauncherVariables& vars = topology.under_mpirun ? kMpirunVariables : kTorchrunVariables;
    topology.source = vars.launcher;
    read_rank_and_size(env, vars.rank, vars.size, /*required=*/true, &topology.rank,
                       &topology.size);
    if (!read_rank_and_size(env, vars.local_rank, vars.local_size, /*required=*/false,
                            &topology.local_rank, &topology.local_size)) {
      topology.local_rank = 0;
      topology.local_size = 1;
    }
    if ((flags.rank != -1 && flags.rank != topology.rank) ||
        (flags.size != -1 && flags.size != topology.size)) {
      RINGD_THROW(kInvalidArgument, "--rank/--size contradict "
                                        << vars.launcher << " (rank " << topology.rank << " of "
                                        << topology.size << "); drop them under " << vars.launcher);
    }
    if (topology.under_torchrun && topology.transport == "mpi" && topology.size > 1) {
      RINGD_THROW(kInvalidArgument,
                  "--transport mpi needs mpirun to start the ranks; under "
                  "torchrun use --transport tcp (rendezvous at MASTER_ADDR)");
    }
    // The pod is resolved only when asked for on the command line, and then only to name the
    // pods.
    if (flags.replicas != -1 || !flags.pod_name.empty()) {
      topology.pod = resolve_pod_identity(flags, env);
    }
  } else if (statefulset_given(flags, env)) {
    topology.source = "statefulset";
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
      topology.source = "explicit";
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
  } else if (uses_store && topology.size > 1 && topology.under_torchrun) {
    torchrun_rendezvous(env, &topology);
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

JobIdentity resolve_job_identity(const Topology& topology, const EnvLookup& env,
                                 const std::string& secret) {
  JobIdentity identity;
  const auto given = [&env](const char* name) -> std::string {
    const char* value = env(name);
    return value ? value : "";
  };
  const std::string explicit_id = given("RINGD_JOB_ID");
  const std::string run_id = given("TORCHELASTIC_RUN_ID");
  const std::string mpirun_job = given("OMPI_MCA_ess_base_jobid");
  Sha256Digest digest{};
  if (!explicit_id.empty()) {
    identity.source = "RINGD_JOB_ID=" + explicit_id;
  } else if (topology.under_torchrun && !run_id.empty() && run_id != "none") {
    identity.source = "torchrun run " + run_id;
  } else if (topology.under_mpirun && !mpirun_job.empty()) {
    identity.source = "mpirun job " + mpirun_job;
  } else if (topology.pod.ordinal >= 0 && !topology.pod.set_name.empty()) {
    identity.source =
        "StatefulSet " +
        (topology.pod.namespace_name.empty() ? "default" : topology.pod.namespace_name) + "/" +
        topology.pod.set_name;
  } else if (!secret.empty()) {
    identity.source = "the job secret";
    const std::string label = "ringd job identity";
    digest = hmac_sha256(secret, label.data(), label.size());
  } else {
    return identity;
  }
  if (identity.source != "the job secret") {
    const std::string text = "ringd job identity\n" + identity.source;
    digest = sha256(text.data(), text.size());
  }
  identity.id = hex(digest.data(), 16);
  return identity;
}

}  // namespace ringd::job
