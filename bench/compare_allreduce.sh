#!/usr/bin/env bash
# ringd against Open MPI and Gloo on an emulated cluster, in one run (docs/performance.md).
#
#   bench/compare_allreduce.sh [--nodes N] [--rate RATE] [--iters K] [--repeat R] [--out DIR]
#                              [--wait-idle PCT] [--systems LIST] [--build-dir DIR]
#                              [--burst BYTES] [--stat median|min]
#
#   --nodes N       emulated nodes, one rank each (default 4; at least 2)
#   --rate RATE     tc rate of every port: 1gbit, 10gbit, ... (default 1gbit)
#   --iters K       timed iterations at 256K..1M; 25K below, K/2 at 4M..16M, K/5 at 64M (default 20)
#   --out DIR       results: <system>.jsonl, logs, line*.json, table.md, allreduce_busbw.png
#                   (default /tmp/ringd-compare-RATE-nN)
#   --repeat R      sweep every system R times, interleaved by band (default 3; the .jsonl files
#                   keep every round)
#   --stat S        what the table shows of each size's rounds: median (default) or min (the
#                   fastest round, what the tables before issue 18 showed)
#   --burst BYTES   tbf burst of every port (default bench/cluster.sh's: 1 ms at the rate, at least
#                   64 KiB); e.g. 125000 and 256000 at 1gbit, the two arenas of issue 18
#   --wait-idle PCT before each band of sizes, wait (up to 5 min) until the CPUs are at least
#                   PCT% idle over 1 s: on a shared machine other work is the main source of noise
#                   (default 0: never wait)
#   --systems LIST  comma-separated subset of line,ringd-tcp,ringd-mpi,openmpi,gloo,gloo-hd
#                   (default all)
#   --build-dir DIR build directory holding ringd and the references (default $RINGD_BUILD_DIR or
#                   build; built here with scripts/build.sh when a binary is missing)
#
# Brings up bench/cluster.sh (N namespaces on a bridge, tbf on both ends of each veth) and always
# takes it down again on exit. Measures, sizes 4K..64M x4, float32 sum, one rank per node:
#   line       one iperf3 TCP stream node0 -> node1 (GB/s), and N concurrent streams in a ring
#   ringd-tcp  ringd bench allreduce --transport tcp --iface eth0 under mpirun
#   ringd-mpi  ringd bench allreduce --transport mpi under mpirun
#   openmpi    bench/mpi_allreduce_ref (MPI_Allreduce) under mpirun
#   gloo       bench/gloo_allreduce_ref (gloo::allreduce, ring, Gloo's TCP transport) under mpirun
#   gloo-hd    the same with gloo::AllreduceHalvingDoubling, Gloo's faster algorithm below ~1 MB
# then prints one side-by-side table and plots busbw against size (bench/plot_allreduce.py).
# Every RINGD_* variable set by the caller reaches the ringd ranks (mpirun -x), so tuning
# experiments are e.g.  RINGD_SEGMENT_BYTES=256K bench/compare_allreduce.sh --systems ringd-tcp
# mpirun runs inside node 0's namespace; bench/netns_rsh.sh starts the other ranks' daemons.
set -euo pipefail
command_line="bench/compare_allreduce.sh $*"  # before the arguments are parsed away
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
bench_name=compare
# shellcheck source=bench/lib.sh
source bench/lib.sh

nodes=4
rate=1gbit
iters=20
repeat=3
wait_idle=0
stat=median
burst=
out=
systems=line,ringd-tcp,ringd-mpi,openmpi,gloo,gloo-hd
build_dir=${RINGD_BUILD_DIR:-build}

usage() {
  sed -n '2,38p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --nodes) nodes=${2:?}; shift 2 ;;
    --rate) rate=${2:?}; shift 2 ;;
    --iters) iters=${2:?}; shift 2 ;;
    --repeat) repeat=${2:?}; shift 2 ;;
    --wait-idle) wait_idle=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --systems) systems=${2:?}; shift 2 ;;
    --build-dir) build_dir=${2:?}; shift 2 ;;
    --stat) stat=${2:?}; shift 2 ;;
    --burst) burst=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    *) echo "compare: unknown argument '$1'" >&2; usage ;;
  esac
done
check_number --nodes "$nodes" 2 250
check_number --iters "$iters" 1 1000000
check_number --repeat "$repeat" 1 100
check_number --wait-idle "$wait_idle" 0 100
if [[ $stat != median && $stat != min ]]; then
  echo "compare: --stat must be median or min, got '$stat'" >&2
  exit 2
fi
if [[ -n $burst ]]; then
  check_number --burst "$burst" 1600 1000000000
  cluster_burst=$burst  # bench/lib.sh's cluster_up
fi
out=${out:-/tmp/ringd-compare-$rate-n$nodes}
[[ $build_dir = /* ]] || build_dir=$repo/$build_dir
wants() { [[ ,$systems, == *,$1,* ]]; }
log() { bench_log "$@"; }
require_root
ensure_packages iperf3 libgloo-dev python3-matplotlib openmpi-bin libopenmpi-dev

ringd=$build_dir/bin/ringd
mpi_ref=$build_dir/bench/mpi_allreduce_ref
gloo_ref=$build_dir/bench/gloo_allreduce_ref
targets=(ringd mpi_allreduce_ref)
[[ -e /usr/include/gloo/allreduce.h ]] && targets+=(gloo_allreduce_ref)
ensure_built "$build_dir" "${targets[@]}"

# ---- the cluster, always taken down ----
work=$(mktemp -d /tmp/ringd-compare.XXXXXX)
bench_cleanup_extra() { rm -rf "$work"; }
cluster_up
write_meta "$command_line" "nodes=$nodes" "rate=$rate" "iters=$iters" \
  "repeat=$repeat" "wait_idle_percent=$wait_idle" "stat=$stat" \
  "tbf_burst=$(RINGD_CLUSTER_TBF_BURST=$burst bench/cluster.sh burst "$rate")"
hostfile=$out/hostfile
rm -f "$out/idle.log"
write_hostfile "$hostfile" 1

# ---- (a) the line ----
line_gbps=
if wants line; then
  measure_line

  log "line: $nodes concurrent streams in a ring, node i -> node i+1 (iperf3, 5 s)"
  pids=()
  for ((i = 0; i < nodes; i++)); do
    in_node "$i" iperf3 -s -1 -p 5202 >/dev/null 2>&1 &
    pids+=($!)
  done
  sleep 0.5
  clients=()
  for ((i = 0; i < nodes; i++)); do
    in_node "$i" iperf3 -c "10.77.0.$(((i + 1) % nodes + 1))" -p 5202 -t 5 -J >"$work/ring$i.json" &
    clients+=($!)
  done
  wait "${clients[@]}" "${pids[@]}" || true
  ring_each=()
  for ((i = 0; i < nodes; i++)); do ring_each+=("$(iperf_gbps <"$work/ring$i.json")"); done
  python3 - "$out/line.json" "${ring_each[@]}" >"$out/line_summary.json" <<'EOF'
import json, sys
single = json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8e9
ring = [float(x) for x in sys.argv[2:]]
print(json.dumps({"single_stream_GBps": round(single, 4), "ring_streams_GBps": ring,
                  "ring_min_GBps": min(ring)}))
EOF
  log "line: ring streams ${ring_each[*]} GB/s"
fi

# ---- (b)-(e) the allreduce sweeps ----
set_mpirun_common
mpirun_flags=("${mpirun_common[@]}" --hostfile "$hostfile" -np "$nodes" --map-by node)

# Sizes in bands, so that small sizes get many iterations and 64M a few (a full 4-node run stays
# within a few minutes at 1gbit): -b -e iters warmup. Up to 512K the warm-up covers ringd's tuning
# calls (50 per size, src/allreduce/allreduce_tuner.h), so the timed iterations are the steady state.
# 25K at 4K..64K (500 by default): with 5K, a 4 KB run lasted 10-15 ms, and one scheduler hiccup
# of the 2-core host moved its mean by 2x (ringd's three rounds 123, 428, 190 µs in one run).
bands=("4K 64K $((iters * 25)) $((iters / 2 + 52))"
  "256K 1M $iters $((iters / 4 + 52))"
  "4M 16M $(((iters + 1) / 2)) 2"
  "64M 64M $(( iters / 5 > 3 ? iters / 5 : 3 )) 1")

failed=()
gloo_store=$work/gloo-store
run_band() { # name min max iters warmup   (one mpirun, appending to $out/name.jsonl)
  local name=$1 min=$2 max=$3 n=$4 warm=$5 command
  case $name in
    ringd-tcp) command=("${ringd_env[@]}" "$ringd" bench allreduce --transport tcp --iface eth0) ;;
    ringd-mpi) command=("${ringd_env[@]}" "$ringd" bench allreduce --transport mpi) ;;
    openmpi) command=("$mpi_ref") ;;
    gloo) command=("$gloo_ref" --store "$gloo_store" --iface eth0) ;;
    gloo-hd) command=("$gloo_ref" --store "$gloo_store" --iface eth0 --algorithm halving_doubling) ;;
  esac
  log "$name (round $round): $min..$max, $n iterations after $warm warm-up"
  # A fresh Gloo rendezvous directory per job: FileStore keys must not outlive it.
  rm -rf "$gloo_store" && mkdir -p "$gloo_store"
  if ! timeout 600 bench/cluster.sh exec 0 mpirun "${mpirun_flags[@]}" "${command[@]}" \
      -b "$min" -e "$max" -f 4 --iters "$n" --warmup "$warm" --check --json "$out/$name.jsonl" \
      </dev/null >>"$out/$name.log" 2>&1; then
    log "$name failed at $min..$max (see $out/$name.log)"
    failed+=("$name")
  fi
}

sweeps=()
wants ringd-tcp && sweeps+=(ringd-tcp)
wants ringd-mpi && sweeps+=(ringd-mpi)
wants openmpi && sweeps+=(openmpi)
for name in gloo gloo-hd; do
  if wants "$name"; then
    if [[ -x $gloo_ref ]]; then
      sweeps+=("$name")
    else
      log "$name: $gloo_ref not built (libgloo-dev missing): skipped"
    fi
  fi
done
for name in "${sweeps[@]}"; do rm -f "$out/$name.jsonl" "$out/$name.log"; done
# Every band runs all systems back to back, and the rounds repeat that: the speed of this machine
# drifts by tens of percent over minutes (other work, other VMs on the host), and this way a drift
# hits every system at the same sizes instead of one system's whole sweep. The table shows each
# size's median round (or fastest, --stat min).
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

# ---- table and plot ----
find_plot_python
plot_args=(--dir "$out" --rate "$rate" --stat "$stat" --table "$out/table.md"
  --png "$out/allreduce_busbw.png")
[[ -n $line_gbps ]] && plot_args+=(--line-GBps "$line_gbps")
"$plot_python" bench/plot_allreduce.py "${plot_args[@]}"
log "results in $out (table.md, allreduce_busbw.png, *.jsonl, *.log)"
if ((${#failed[@]} > 0)); then
  log "failed: ${failed[*]}"
  exit 1
fi
