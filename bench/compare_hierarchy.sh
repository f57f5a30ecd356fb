#!/usr/bin/env bash
# N nodes x L devices: ringd's hierarchical allreduce against one flat ring of N x L processes, on
# the emulated cluster, in one run (docs/performance.md, "Hierarchy: N nodes x L devices").
#
#   bench/compare_hierarchy.sh [--nodes N] [--devices L] [--rate RATE] [--iters K] [--repeat R]
#                              [--out DIR] [--wait-idle PCT] [--systems LIST] [--build-dir DIR]
#
#   --nodes N       emulated nodes (default 4; at least 2)
#   --devices L     devices per node (default 4)
#   --rate RATE     tc rate of every port: 1gbit, 10gbit, ... (default 1gbit)
#   --iters K       timed iterations at 256K..1M; 5K below, K/2 at 4M..16M, K/5 at 64M (default 20)
#   --repeat R      sweep every system R times, interleaved by band; the table keeps each size's
#                   fastest round (default 3; the .jsonl files keep every round)
#   --out DIR       results (default /tmp/ringd-hierarchy-RATE-nNxL)
#   --wait-idle PCT before each band, wait (up to 5 min) until the CPUs are PCT% idle over 1 s
#   --systems LIST  comma-separated subset of line,reduce-bcast,rs-ag,flat (default all)
#   --build-dir DIR build directory holding ringd (default $RINGD_BUILD_DIR or build; built here
#                   with scripts/build.sh, without CUDA, when ringd is missing)
#
# Brings up bench/cluster.sh (N namespaces, tbf on both ends of each veth) and always takes it
# down again on exit. Sizes 4K..64M x4, float32 sum, every run --check'ed, ringd's tcp transport:
#   line          one iperf3 TCP stream node0 -> node1 (GB/s)
#   reduce-bcast  N processes (one per node), each --local-devices L --hierarchy reduce-bcast
#   rs-ag         the same with --hierarchy rs-ag
#   flat          N x L processes, L per node (mpirun --map-by slot over a hostfile with slots=L):
#                 one flat allreduce over all N x L ranks; ranks of one node talk over loopback
# then one table (time, per-node busbw, ratios), a PNG and the raw JSON lines
# (bench/plot_hierarchy.py). The exact command line is recorded in DIR/meta.json.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
command_line="bench/compare_hierarchy.sh $*"

nodes=4
devices=4
rate=1gbit
iters=20
repeat=3
wait_idle=0
out=
systems=line,reduce-bcast,rs-ag,flat
build_dir=${RINGD_BUILD_DIR:-build}

usage() {
  sed -n '2,30p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --nodes) nodes=${2:?}; shift 2 ;;
    --devices) devices=${2:?}; shift 2 ;;
    --rate) rate=${2:?}; shift 2 ;;
    --iters) iters=${2:?}; shift 2 ;;
    --repeat) repeat=${2:?}; shift 2 ;;
    --wait-idle) wait_idle=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --systems) systems=${2:?}; shift 2 ;;
    --build-dir) build_dir=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    *) echo "compare_hierarchy: unknown argument '$1'" >&2; usage ;;
  esac
done
check_number() { # name value min max
  if ! [[ $2 =~ ^[0-9]+$ ]] || (($2 < $3 || $2 > $4)); then
    echo "compare_hierarchy: $1 must be a number in $3..$4, got '$2'" >&2
    exit 2
  fi
}
check_number --nodes "$nodes" 2 250
check_number --devices "$devices" 1 64
check_number --iters "$iters" 1 1000000
check_number --repeat "$repeat" 1 100
check_number --wait-idle "$wait_idle" 0 100
out=${out:-/tmp/ringd-hierarchy-$rate-n${nodes}x$devices}
[[ $build_dir = /* ]] || build_dir=$repo/$build_dir
wants() { [[ ,$systems, == *,$1,* ]]; }
log() { echo "compare_hierarchy: $*" >&2; }

if ((EUID != 0)); then
  echo "compare_hierarchy: needs root (network namespaces, tc); run with sudo" >&2
  exit 1
fi
for tool in mpirun iperf3 python3; do
  command -v "$tool" >/dev/null || log "$tool not found (apt-get install openmpi-bin iperf3 python3)"
done
ringd=$build_dir/src/launcher/ringd
if [[ ! -x $ringd ]]; then
  log "building ringd in $build_dir"
  cuda_off=()
  [[ -f $build_dir/CMakeCache.txt ]] || cuda_off=(-DRINGD_WITH_CUDA=OFF)
  RINGD_BUILD_DIR=$build_dir RINGD_BUILD_TARGETS=ringd scripts/build.sh "${cuda_off[@]}" >&2
fi

# ---- the cluster, always taken down ----
mkdir -p "$out"
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  bench/cluster.sh down "$nodes" || true
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench/cluster.sh down "$nodes"
bench/cluster.sh up "$nodes" "$rate"
python3 - "$out/meta.json" "$command_line" "$nodes" "$devices" "$rate" "$iters" "$repeat" \
  "$wait_idle" <<'EOF'
import json, os, subprocess, sys, time
path, command, nodes, devices, rate, iters, repeat, wait_idle = sys.argv[1:]
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
json.dump({"command": command, "nodes": int(nodes), "devices": int(devices), "rate": rate,
           "iters": int(iters), "repeat": int(repeat), "wait_idle_percent": int(wait_idle),
           "cpus": os.cpu_count(), "commit": commit.stdout.strip(), "nice": os.nice(0),
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "loadavg_start": " ".join(open("/proc/loadavg").read().split()[:3]),
           "ringd_env": {k: v for k, v in os.environ.items()
                         if k.startswith("RINGD_") and "SECRET" not in k}},
          open(path, "w"))
EOF
# One hostfile per shape: one slot per node (hierarchical), L slots per node (flat).
: >"$out/hosts-1"
: >"$out/hosts-$devices"
for ((i = 0; i < nodes; i++)); do
  echo "10.77.0.$((i + 1)) slots=1" >>"$out/hosts-1"
  echo "10.77.0.$((i + 1)) slots=$devices" >>"$out/hosts-$devices"
done
in_node() { local node=$1; shift; bench/cluster.sh exec "$node" "$@"; }

idle_percent() { # percent of CPU time idle over the next second
  local a b
  a=$(awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat)
  sleep 1
  b=$(awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN {split(a, x, " "); split(b, y, " ");
    printf "%d\n", (y[2] > x[2]) ? 100 * (y[1] - x[1]) / (y[2] - x[2]) : 100}'
}
await_idle() { # label
  ((wait_idle > 0)) || return 0
  local deadline=$((SECONDS + 300)) idle
  while idle=$(idle_percent) && ((idle < wait_idle)); do
    if ((SECONDS >= deadline)); then
      echo "$1 idle=$idle% (gave up waiting)" >>"$out/idle.log"
      return 0
    fi
    sleep 5
  done
  echo "$1 idle=$idle%" >>"$out/idle.log"
}

# ---- the line ----
line_gbps=
if wants line; then
  await_idle line
  log "line: one TCP stream node0 -> node1 (iperf3, 5 s)"
  in_node 1 iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
  server=$!
  sleep 0.5
  in_node 0 iperf3 -c 10.77.0.2 -p 5201 -t 5 -J >"$out/line.json"
  wait "$server" || true
  line_gbps=$(python3 -c 'import json,sys; print("%.4f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8e9))' "$out/line.json")
  log "line: $line_gbps GB/s"
fi

# ---- the sweeps ----
# (btl "tcp,self" is one Open MPI value; shellcheck mistakes the comma for an array separator.)
# shellcheck disable=SC2054
mpirun_common=(--allow-run-as-root --oversubscribe --bind-to none
  --mca plm_rsh_agent "$repo/bench/netns_rsh.sh" --mca btl tcp,self
  --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 --mca mpi_yield_when_idle 1
  -x RINGD_IFACE=eth0 -x "RINGD_JOB_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')")
while IFS='=' read -r name _; do
  [[ $name == RINGD_IFACE || $name == RINGD_JOB_SECRET ]] || mpirun_common+=(-x "$name")
done < <(env | grep '^RINGD_[A-Z_]*=' || true)

bands=("4K 64K $((iters * 5)) $((iters / 2 + 2))"
  "256K 1M $iters $((iters / 4 + 1))"
  "4M 16M $(((iters + 1) / 2)) 2"
  "64M 64M $((iters / 5 > 3 ? iters / 5 : 3)) 1")

failed=()
run_band() { # name min max iters warmup   (one mpirun, appending to $out/name.jsonl)
  local name=$1 min=$2 max=$3 n=$4 warm=$5
  local -a shape extra
  case $name in
    reduce-bcast | rs-ag)
      shape=(--hostfile "$out/hosts-1" -np "$nodes" --map-by node)
      extra=(--local-devices "$devices" --hierarchy "$name")
      ;;
    flat)
      shape=(--hostfile "$out/hosts-$devices" -np "$((nodes * devices))" --map-by slot)
      extra=()
      ;;
  esac
  log "$name (round $round): $min..$max, $n iterations after $warm warm-up"
  if ! timeout 900 bench/cluster.sh exec 0 mpirun "${mpirun_common[@]}" "${shape[@]}" \
    "$ringd" bench allreduce --transport tcp --iface eth0 "${extra[@]}" \
    -b "$min" -e "$max" -f 4 --iters "$n" --warmup "$warm" --check --json "$out/$name.jsonl" \
    </dev/null >>"$out/$name.log" 2>&1; then
    log "$name failed at $min..$max (see $out/$name.log)"
    failed+=("$name")
  fi
}

sweeps=()
for name in reduce-bcast rs-ag flat; do wants "$name" && sweeps+=("$name"); done
for name in "${sweeps[@]}"; do rm -f "$out/$name.jsonl" "$out/$name.log"; done
rm -f "$out/idle.log"
for ((round = 1; round <= repeat; round++)); do
  for band in "${bands[@]}"; do
    read -r min max n warm <<<"$band"
    await_idle "round $round $min..$max"
    for name in "${sweeps[@]}"; do
      [[ " ${failed[*]} " == *" $name "* ]] && continue
      run_band "$name" "$min" "$max" "$n" "$warm"
    done
  done
done

python3 - "$out/meta.json" <<'EOF'
import json, sys
meta = json.load(open(sys.argv[1]))
meta["loadavg_end"] = " ".join(open("/proc/loadavg").read().split()[:3])
json.dump(meta, open(sys.argv[1], "w"))
EOF

plot_python=python3
python3 -c 'import matplotlib' 2>/dev/null || plot_python=/usr/bin/python3
plot_args=(--dir "$out" --rate "$rate" --nodes "$nodes" --devices "$devices"
  --table "$out/table.md" --png "$out/hierarchy_nodebw.png")
[[ -n $line_gbps ]] && plot_args+=(--line-GBps "$line_gbps")
"$plot_python" bench/plot_hierarchy.py "${plot_args[@]}"
log "results in $out (table.md, hierarchy_nodebw.png, *.jsonl, *.log, meta.json)"
if ((${#failed[@]} > 0)); then
  log "failed: ${failed[*]}"
  exit 1
fi
