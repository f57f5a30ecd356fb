// Where this process sits in the job: its rank, the world size and how it will find its peers.
// Four sources: Open MPI's environment (OMPI_COMM_WORLD_RANK/SIZE) under mpirun; torchrun's
// (RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE, rendezvous at MASTER_ADDR); a Kubernetes
// StatefulSet (pod name "<set>-<ordinal>", replicas, headless service, namespace: see
// docs/launcher.md), which gives rank = ordinal and size = replicas; and --rank/--size/
// --rendezvous. With none, the process is a world of one. When two sources are given and disagree
// the result is an error naming both. Pure functions of the flags and the environment, so they
// are unit-tested without launching anything.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ringd::job {

// What the command line said (-1 / empty = not given).
struct TopologyFlags {
  int rank = -1;
  int size = -1;
  std::string rendezvous;  // host:port of rank 0's TcpStoreServer
  std::string transport;   // tcp | mpi | ibverbs | inproc | empty (choose)
  int inproc_ranks = -1;   // --ranks: threads in this process (inproc only)
  // StatefulSet identity; each falls back to the environment variable in brackets.
  std::string pod_name;        // --pod-name [POD_NAME, else HOSTNAME]
  std::string service;         // --service [RINGD_SERVICE, else the set's name]
  std::string namespace_name;  // --namespace [POD_NAMESPACE, else "default"]
  std::string cluster_domain;  // --cluster-domain [RINGD_CLUSTER_DOMAIN, else cluster.local]
  int replicas = -1;           // --replicas [RINGD_REPLICAS]; known replicas = a StatefulSet pod
};

// This pod's place in its StatefulSet (ordinal -1: not a StatefulSet pod).
struct PodIdentity {
  std::string set_name;  // "ringd" for pod "ringd-2"
  int ordinal = -1;
  int replicas = 0;
  std::string service;
  std::string namespace_name;
  std::string cluster_domain;
};

struct Topology {
  int rank = 0;
  int size = 1;
  // The processes on this host: mpirun's and torchrun's local rank and size; 0 of 1 otherwise.
  int local_rank = 0;
  int local_size = 1;
  bool under_mpirun = false;
  bool under_torchrun = false;
  // What said where this process sits: "explicit" (flags), "mpirun", "torchrun", "statefulset",
  // "inproc" or "single" (nothing: a world of one).
  std::string source = "single";
  std::string transport;  // tcp | mpi | ibverbs | inproc
  // Standalone tcp/ibverbs with size > 1: where rank 0 serves the rendezvous store.
  std::string rendezvous_host;
  uint16_t rendezvous_port = 0;
  // Set when the StatefulSet inputs were given (under mpirun too: it names the pods).
  PodIdentity pod;
};

// Pod `ordinal`'s DNS name through the headless service:
// "<set>-<ordinal>.<service>.<namespace>.svc.<cluster domain>".
std::string pod_dns_name(const PodIdentity& pod, int ordinal);

// Standalone rendezvous port on pod 0 when a StatefulSet pod is given no --rendezvous.
constexpr uint16_t kDefaultRendezvousPort = 29500;

// Under torchrun rank 0 serves ringd's rendezvous store at MASTER_ADDR, port RINGD_RENDEZVOUS_PORT
// when set, else MASTER_PORT + 1: torchrun's own store already listens on MASTER_PORT.
constexpr int kTorchrunPortOffset = 1;

// Reads one environment variable; nullptr when unset. Tests pass a map-backed lookup. The process
// lookup answers "HOSTNAME" with gethostname() when the variable is unset (a pod's host name is its
// pod name).
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup process_environment();

// Throws ringd::Error(kInvalidArgument) with a message naming the offending flag or variable, or
// kUnavailable when the chosen transport was not built in. `have_mpi` is RINGD_HAVE_MPI.
Topology resolve_topology(const TopologyFlags& flags, const EnvLookup& env, bool have_mpi);

// The StatefulSet identity alone (used by `ringd agent`, `hostfile`, `launch`): throws
// kInvalidArgument naming the flag or variable when the pod name is not "<set>-<ordinal>", the
// replicas are unknown or the ordinal is outside them.
PodIdentity resolve_pod_identity(const TopologyFlags& flags, const EnvLookup& env);

// Throws kInvalidArgument naming the flag or variable when a pod name was given (--pod-name, or
// POD_NAME) and is not "<statefulset>-<ordinal>", or when the two disagree. An absent name is not
// an error here: `ringd agent` without launch arguments then serves under its host name, unready.
void check_explicit_pod_name(const TopologyFlags& flags, const EnvLookup& env);

// Which job a rank belongs to, as its launcher says before any connection is made, so that the
// rendezvous store and every peer can refuse a process of another job
// (rendezvous/job_membership.h).
struct JobIdentity {
  std::string id;      // 32 hex digits derived from `source`; "" = none known
  std::string source;  // what it came from, for messages: "RINGD_JOB_ID=train-7",
                       // "torchrun run 5c1f", "mpirun job 358350849", "StatefulSet ml/ringd",
                       // "the job secret"
};

// In order: RINGD_JOB_ID (set it to the same value on every rank), torchrun's run id
// (TORCHELASTIC_RUN_ID, unless torchrun's default "none"), mpirun's job (Open MPI's
// OMPI_MCA_ess_base_jobid), the StatefulSet (namespace and name: one job per set at a time), the
// job secret (a keyed hash of it: processes that know it belong to the job anyway). None of them:
// an empty id, and the first rank to reach the store chooses one.
JobIdentity resolve_job_identity(const Topology& topology, const EnvLookup& env,
                                 const std::string& secret);

// "host:port" or "[v6]:port" -> host and port; throws kInvalidArgument naming `flag`.
void parse_host_port(const std::string& flag, const std::string& text, std::string* host,
                     uint16_t* port);

}  // namespace ringd::job
