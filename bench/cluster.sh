#!/usr/bin/env bash
# An emulated cluster on one machine: N Linux network namespaces on one bridge, every port
# rate-limited with tc tbf in both directions.
#
#   bench/cluster.sh up N RATE     create (or re-create to the same state) nodes 0..N-1 at RATE
#   bench/cluster.sh down N        remove nodes 0..N-1 and the bridge (ok when nothing exists)
#   bench/cluster.sh exec I CMD... run CMD inside node I's namespace, with TMPDIR set as
#                                  bench/netns_rsh.sh sets it (so mpirun can run there)
#   bench/cluster.sh status        namespaces, bridge ports and qdiscs
#   bench/cluster.sh burst RATE    the tbf burst (bytes) that up would give every port at RATE
#
# RATE is a tc rate: 100mbit, 1gbit, 10gbit, ...
#
# Names and addresses can be moved aside so that a test's cluster does not collide with a
# benchmark's: RINGD_CLUSTER_NODE_PREFIX (namespaces, default ringd-node), RINGD_CLUSTER_PORT_PREFIX
# (bridge ports, default ringd-v; at most 12 characters), RINGD_CLUSTER_BRIDGE (default ringd-br0),
# RINGD_CLUSTER_SUBNET (the first three octets, default 10.77.0). tests/integration/
# launcher_netns_test.py uses them. RINGD_CLUSTER_TBF_BURST=BYTES replaces the tbf burst chosen
# below (an arena with more or less burst credit: a result must not depend on it).
# RINGD_CLUSTER_CONGESTION=NAME (reno, cubic, bbr: what the kernel allows) is every node's default
# TCP congestion control, the namespace's net.ipv4.tcp_congestion_control: what Open MPI, Gloo
# and Horovod use (ringd chooses its own, RINGD_TCP_CONGESTION). Unset: the host's default, which
# new namespaces inherit (up sets it again on a node left from an earlier cluster).
#
#              root namespace                          namespace ringd-node<i>
#   ringd-br0 (bridge, no address) ── ringd-v<i> ══ veth ══ eth0  10.77.0.<i+1>/24
#                                     tbf: bridge -> node     tbf: node -> bridge
#
# A packet from node a to node b is shaped twice: on a's eth0 (a's uplink) and on ringd-v<b> (b's
# downlink), like a switch with one rate-limited port per host. Both ends of every veth get
#
#   tc qdisc replace dev DEV root tbf rate RATE burst BURST latency 5ms
#
# with BURST = RATE x 1 ms, at least 64 KiB (1gbit: 125000 B; 10gbit: 1250000 B). Why: tbf can only
# send a packet once BURST bytes of tokens are saved up, and a veth carries GSO packets of up to
# 64 KiB, so a smaller burst re-segments or stalls them; and the kernel refills tokens in timer
# ticks, so a burst smaller than one tick's worth of bytes caps the rate below RATE. Measured here
# with one iperf3 stream (docs/performance.md): at 10gbit a 64 KiB burst carried 0.14-0.17 GB/s and
# 250 KB 0.90-0.98, while 1.25 MB (1 ms) carried 1.01-1.08 GB/s, as much as 5 MB; at 1gbit 16 KB
# carried 0.083 GB/s and 125 KB (1 ms) 0.117-0.119, the line (0.125 GB/s less TCP/IP headers).
# latency 5ms bounds the queue (limit = RATE x 5 ms + BURST) so TCP sees drops, not an
# ever-growing queue.
set -euo pipefail

readonly BRIDGE=${RINGD_CLUSTER_BRIDGE:-ringd-br0}
readonly SUBNET=${RINGD_CLUSTER_SUBNET:-10.77.0}
readonly NODE_PREFIX=${RINGD_CLUSTER_NODE_PREFIX:-ringd-node}
readonly PORT_PREFIX=${RINGD_CLUSTER_PORT_PREFIX:-ringd-v}
readonly TBF_LATENCY=5ms

node_name() { echo "$NODE_PREFIX$1"; }
port_name() { echo "$PORT_PREFIX$1"; }
node_address() { echo "$SUBNET.$(($1 + 1))"; }

usage() {
  sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

check_count() {
  if ! [[ $1 =~ ^[0-9]+$ ]] || (($1 < 1 || $1 > 250)); then
    echo "cluster: node count must be 1..250, got '$1'" >&2
    exit 2
  fi
}

# Bits per second of a tc rate (100mbit, 1gbit, 10gbit, 500kbit, 1000000bit).
rate_bits() {
  local rate=${1,,} number unit
  [[ $rate =~ ^([0-9]+)([kmg]?bit)$ ]] || {
    echo "cluster: rate must look like 100mbit, 1gbit or 10gbit, got '$1'" >&2
    exit 2
  }
  number=${BASH_REMATCH[1]}
  unit=${BASH_REMATCH[2]}
  case $unit in
    bit) echo "$number" ;;
    kbit) echo $((number * 1000)) ;;
    mbit) echo $((number * 1000000)) ;;
    gbit) echo $((number * 1000000000)) ;;
  esac
}

# tbf burst in bytes: one millisecond at RATE, at least 64 KiB (one GSO packet), unless
# RINGD_CLUSTER_TBF_BURST says otherwise.
tbf_burst() {
  if [[ -n ${RINGD_CLUSTER_TBF_BURST:-} ]]; then
    if ! [[ $RINGD_CLUSTER_TBF_BURST =~ ^[0-9]+$ ]] || ((RINGD_CLUSTER_TBF_BURST < 1600)); then
      echo "cluster: RINGD_CLUSTER_TBF_BURST must be a byte count of at least 1600," \
        "got '$RINGD_CLUSTER_TBF_BURST'" >&2
      exit 2
    fi
    echo "$RINGD_CLUSTER_TBF_BURST"
    return
  fi
  local bytes=$(($(rate_bits "$1") / 8 / 1000))
  ((bytes < 65536)) && bytes=65536
  echo "$bytes"
}

shape() { # DEV RATE [netns]
  local dev=$1 rate=$2 ns=${3:-} burst
  burst=$(tbf_burst "$rate")
  if [[ -n $ns ]]; then
    ip -n "$ns" link set "$dev" up
    tc -n "$ns" qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency "$TBF_LATENCY"
  else
    tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency "$TBF_LATENCY"
  fi
}

# The nodes' default congestion control: RINGD_CLUSTER_CONGESTION, checked against what the
# kernel allows, else the host's.
node_congestion() {
  local name=${RINGD_CLUSTER_CONGESTION:-} allowed
  if [[ -z $name ]]; then
    sysctl -n net.ipv4.tcp_congestion_control
    return
  fi
  allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
  if ! [[ " $allowed " == *" $name "* ]]; then
    echo "cluster: RINGD_CLUSTER_CONGESTION=$name: this kernel allows $allowed" \
      "(net.ipv4.tcp_allowed_congestion_control)" >&2
    exit 2
  fi
  echo "$name"
}

up() {
  local count=$1 rate=$2 i ns port congestion
  check_count "$count"
  rate_bits "$rate" >/dev/null
  congestion=$(node_congestion)
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
  fi
  # Forward at once (no STP listening delay); the bridge itself has no address: the root
  # namespace never talks to the nodes.
  ip link set "$BRIDGE" type bridge stp_state 0 forward_delay 0
  ip link set "$BRIDGE" up
  for ((i = 0; i < count; i++)); do
    ns=$(node_name "$i")
    port=$(port_name "$i")
    ip netns list | grep -w "^$ns" >/dev/null || ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$congestion"
    if ! ip link show "$port" >/dev/null 2>&1; then
      ip -n "$ns" link del eth0 2>/dev/null || true
      ip link add "$port" type veth peer name eth0 netns "$ns"
    fi
    ip link set "$port" master "$BRIDGE"
    ip link set "$port" up
    ip -n "$ns" addr replace "$(node_address "$i")/24" dev eth0
    shape eth0 "$rate" "$ns"
    shape "$port" "$rate"
  done
  echo "cluster: $count nodes up at $rate (tbf burst $(tbf_burst "$rate") B, latency $TBF_LATENCY," \
    "tcp congestion control $congestion):" \
    "$(node_address 0)..$(node_address $((count - 1))) in $(node_name 0)..$(node_name $((count - 1)))" >&2
}

down() {
  local count=$1 i ns
  check_count "$count"
  for ((i = 0; i < count; i++)); do
    ns=$(node_name "$i")
    # Deleting the namespace deletes eth0 and with it the peer ringd-v<i>.
    if ip netns list | grep -w "^$ns" >/dev/null; then
      # Processes left in the namespace (a server of a killed run) would keep it alive.
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
      ip netns del "$ns"
    fi
    ip link del "$(port_name "$i")" 2>/dev/null || true
    # The node's TMPDIR for Open MPI (bench/netns_rsh.sh).
    rm -rf "${RINGD_NETNS_TMPDIR:-/tmp/ringd-netns}/$ns"
  done
  rmdir "${RINGD_NETNS_TMPDIR:-/tmp/ringd-netns}" 2>/dev/null || true
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    # Remove the bridge only once no ringd port is left on it (nodes beyond N, if any, stay).
    if ! ip -o link show master "$BRIDGE" 2>/dev/null | grep . >/dev/null; then
      ip link del "$BRIDGE"
    fi
  fi
}

status() {
  ip netns list | grep "^$NODE_PREFIX" || echo "(no ringd namespaces)"
  ip -br link show master "$BRIDGE" 2>/dev/null || echo "(no bridge $BRIDGE)"
  local ns
  for ns in $(ip netns list | awk -v p="$NODE_PREFIX" 'index($1, p) == 1 {print $1}'); do
    echo "$ns: $(ip -n "$ns" -br addr show eth0 2>/dev/null)" \
      "tcp congestion control $(ip netns exec "$ns" sysctl -n net.ipv4.tcp_congestion_control)"
    tc -n "$ns" qdisc show dev eth0 2>/dev/null | sed 's/^/  eth0 /'
  done
  tc qdisc show 2>/dev/null | grep -- "$PORT_PREFIX" | sed 's/^/  /' || true
}

[[ $# -ge 1 ]] || usage
command=$1
shift
case $command in
  up)
    [[ $# -eq 2 ]] || usage
    up "$1" "$2"
    ;;
  down)
    [[ $# -eq 1 ]] || usage
    down "$1"
    ;;
  exec)
    [[ $# -ge 2 ]] || usage
    tmpdir=${RINGD_NETNS_TMPDIR:-/tmp/ringd-netns}/$(node_name "$1")
    mkdir -p "$tmpdir"
    exec ip netns exec "$(node_name "$1")" env TMPDIR="$tmpdir" "${@:2}"
    ;;
  status) status ;;
  burst)
    [[ $# -eq 1 ]] || usage
    tbf_burst "$1"
    ;;
  *) usage ;;
esac
