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
bench_name=compare_hierarchy
# shellcheck source=bench/lib.sh
source bench/lib.sh
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
check_number --nodes "$nodes" 2 250
check_number --devices "$devices" 1 64
check_number --iters "$iters" 1 1000000
check_number --repeat "$repeat" 1 100
check_number --wait-idle "$wait_idle" 0 100
out=${out:-/tmp/ringd-hierarchy-$rate-n${nodes}x$devices}
[[ $build_dir = /* ]] || build_dir=$repo/$build_dir
wants() { [[ ,$systems, == *,$1,* ]]; }
log() { bench_log "$@"; }
require_root
for tool in mpirun iperf3 python3; do
  command -v "$tool" >/dev/null || log "$tool not found (apt-get install openmpi-bin iperf3 python3)"
done
ringd=$build_dir/bin/ringd
ensure_built "$build_dir" ringd

# ---- the cluster, always taken down ----
cluster_up
write_meta "$command_line" "nodes=$nodes" "devices=$devices" "rate=$rate" "iters=$iters" \
  "repeat=$repeat" "wait_idle_percent=$wait_idle"
# One hostfile per shape: one slot per node (hierarchical), L slots per node (flat).
write_hostfile "$out/hosts-1" 1
write_hostfile "$out/hosts-$devices" "$devices"
# ---- the line ----
line_gbps=
if wants line; then
  measure_line
fi

# ---- the sweeps ----
set_mpirun_common
mpirun_common+=("${ringd_env[@]}")

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

finish_meta

find_plot_python
plot_args=(--dir "$out" --rate "$rate" --nodes "$nodes" --devices "$devices"
  --table "$out/table.md" --png "$out/hierarchy_nodebw.png")
[[ -n $line_gbps ]] && plot_args+=(--line-GBps "$line_gbps")
"$plot_python" bench/plot_hierarchy.py "${plot_args[@]}"
log "results in $out (table.md, hierarchy_nodebw.png, *.jsonl, *.log, meta.json)"
if ((${#failed[@]} > 0)); then
  log "failed: ${failed[*]}"
  exit 1
fi
