#!/bin/sh
# mpirun's rsh agent for the emulated cluster of bench/cluster.sh: "log in" to a node by entering
# its network namespace on this machine.
#
#   mpirun --mca plm_rsh_agent /abs/path/bench/netns_rsh.sh --hostfile H ...
#
# Open MPI calls   netns_rsh.sh HOST WORD...   where the WORDs form one shell command line (the
# orted launch line, with its own quoting, as ssh would hand it to the remote shell). HOST is a
# node address 10.77.0.<i+1> (what compare_allreduce.sh writes into its hostfiles) or a namespace
# name ringd-node<i>; the command runs as   ip netns exec ringd-node<i> sh -c "WORD..."
# Every namespace shares this machine's file system, users and environment, so the orted binary,
# the benchmark programs and any rendezvous directory under /tmp are the same everywhere; only
# TMPDIR differs (below).
set -eu

if [ $# -lt 2 ]; then
  echo "netns_rsh.sh: usage: netns_rsh.sh HOST COMMAND..." >&2
  exit 2
fi
host=$1
shift

case $host in
  ringd-node[0-9]*)
    node=$host
    ;;
  10.77.0.[0-9]*)
    last=${host##*.}
    node=ringd-node$((last - 1))
    ;;
  *)
    echo "netns_rsh.sh: unknown host '$host' (expected 10.77.0.<i+1> or ringd-node<i>)" >&2
    exit 255
    ;;
esac

if ! ip netns list | grep -qw "^$node"; then
  echo "netns_rsh.sh: namespace $node for host $host does not exist (bench/cluster.sh up N RATE)" >&2
  exit 255
fi

# Every node has the same host name and /tmp, so Open MPI's session directories
# (/tmp/ompi.<hostname>.<uid>/...) and hwloc's shared topology file would collide between the
# daemons of different nodes (seen here: orted crashing in hwloc_shmem_topology_write, "mkdir
# /tmp/ompi.vm.0/jf.N/0: No such file or directory"). Each node gets its own TMPDIR instead, which
# Open MPI uses for all of that. mpirun itself (in node 0) must run with the TMPDIR this script
# gives node 0: see bench/compare_allreduce.sh. bench/cluster.sh down removes these directories.
tmpdir=${RINGD_NETNS_TMPDIR:-/tmp/ringd-netns}/$node
mkdir -p "$tmpdir"
exec ip netns exec "$node" env TMPDIR="$tmpdir" sh -c "$*"
