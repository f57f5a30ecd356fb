// Where this process sits in the job: its rank, the world size and how it will find its peers.
// Under mpirun the answer comes from Open MPI's environment (OMPI_COMM_WORLD_RANK/SIZE); without
// it, from --rank/--size/--rendezvous; with neither, the process is a world of one. Pure functions
// of the flags and the environment, so they are unit-tested without launching anything.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ringd::launcher {

// What the command line said (-1 / empty = not given).
struct TopologyFlags {
  int rank = -1;
  int size = -1;
  std::string rendezvous;  // host:port of rank 0's TcpStoreServer
  std::string transport;   // tcp | mpi | ibverbs | inproc | empty (choose)
  int inproc_ranks = -1;   // --ranks: threads in this process (inproc only)
};

struct Topology {
  int rank = 0;
  int size = 1;
  bool under_mpirun = false;
  std::string transport;  // tcp | mpi | ibverbs | inproc
  // Standalone tcp/ibverbs with size > 1: where rank 0 serves the rendezvous store.
  std::string rendezvous_host;
  uint16_t rendezvous_port = 0;
};

// Reads one environment variable; nullptr when unset. Tests pass a map-backed lookup.
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup process_environment();

// Throws ringd::Error(kInvalidArgument) with a message naming the offending flag or variable, or
// kUnavailable when the chosen transport was not built in. `have_mpi` is RINGD_HAVE_MPI.
Topology resolve_topology(const TopologyFlags& flags, const EnvLookup& env, bool have_mpi);

// "host:port" or "[v6]:port" -> host and port; throws kInvalidArgument naming `flag`.
void parse_host_port(const std::string& flag, const std::string& text, std::string* host,
                     uint16_t* port);

}  // namespace ringd::launcher
