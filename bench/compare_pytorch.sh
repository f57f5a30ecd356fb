#!/usr/bin/env bash
# ringd.torch against Horovod 0.28.1 (horovod.torch, MPI ops) and PyTorch DDP (gloo) on the same
# scripts and the same emulated network (docs/performance.md, "PyTorch: ringd.torch, Horovod,
# DDP"): examples/pytorch/synthetic_benchmark.py and fashion_mnist.py with --framework.
#
#   bench/compare_pytorch.sh [--nodes N] [--rates R[,R...]] [--profile P] [--compute-ms C]
#                            [--iters I] [--rounds R] [--cnn-epochs E]
#                            [--frameworks F[,F...]] [--only PARTS] [--out DIR]
#                            [--build-dir DIR]
#
#   --nodes N        emulated nodes, one rank each (default 4)
#   --rates R,...    tc rates of every port (default 1gbit,10gbit)
#   --profile P      the synthetic model's gradient profile (default resnet50)
#   --compute-ms C   the synthetic model's modeled forward + backward per step (default 100)
#   --iters I        synthetic: timed iterations of 5 steps, after 3 warm-up steps (default 5)
#   --rounds R       synthetic: rounds per rate, the frameworks interleaved in each; the report
#                    compares the medians of the rounds (default 3)
#   --cnn-epochs E   CNN: epochs per run (default 1)
#   --frameworks F   ringd, horovod, ddp (default all three), and ddp-ringd: the same DDP on
#                    ringd's torch.distributed backend
#   --only PARTS     synthetic, cnn, single, comma-separated (default all)
#   --out DIR        results (default /tmp/ringd-pytorch)
#   --build-dir DIR  the build holding ringd's Python package (build/python; default
#                    $RINGD_BUILD_DIR or build)
#
# synthetic/cnn: per rate, each framework under mpirun across the nodes; ringd.torch over ringd's
#   tcp transport (RINGD_TRANSPORT=tcp, eth0), Horovod with its MPI operations, DDP with gloo.
#   The synthetic benchmark runs --rounds times per rate (ringd, horovod, ddp, ringd, ...: on a
#   shared machine one run's figure moves by 10% and more), the CNN once.
# single: one process, no network: plain PyTorch (--framework none) against ringd.torch on the
#   synthetic model (what one rank pays for going through ringd).
# ringd.torch and DDP run in scripts/python_env.sh's environment (torch 2.5.1); Horovod in
# bench/horovod_env.sh's (torch 2.0.1: the newest torch Horovod 0.28.1 builds against here).
# Then bench/report_pytorch.py writes DIR/table.md (with the acceptance verdicts) and
# DIR/pytorch.png. The peers' sockets use the nodes' default TCP congestion control: the host's,
# or RINGD_CLUSTER_CONGESTION's (bench/cluster.sh); ringd's choose their own
# (RINGD_TCP_CONGESTION, reno). The table's last line says which.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
bench_name=compare_pytorch
# shellcheck source=bench/lib.sh
source bench/lib.sh
command_line="bench/compare_pytorch.sh $*"

nodes=4
rates=1gbit,10gbit
profile=resnet50
compute_ms=100
iters=5
rounds=3
cnn_epochs=1
frameworks=ringd,horovod,ddp
only=synthetic,cnn,single
out=/tmp/ringd-pytorch
build_dir=${RINGD_BUILD_DIR:-build}

usage() {
  sed -n '2,37p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --nodes) nodes=${2:?}; shift 2 ;;
    --rates) rates=${2:?}; shift 2 ;;
    --profile) profile=${2:?}; shift 2 ;;
    --compute-ms) compute_ms=${2:?}; shift 2 ;;
    --iters) iters=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --cnn-epochs) cnn_epochs=${2:?}; shift 2 ;;
    --frameworks) frameworks=${2:?}; shift 2 ;;
    --only) only=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --build-dir) build_dir=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    *) echo "$bench_name: unknown argument '$1'" >&2; usage ;;
  esac
done
IFS=, read -r -a rate_list <<<"$rates"
IFS=, read -r -a framework_list <<<"$frameworks"
IFS=, read -r -a parts <<<"$only"
check_number --nodes "$nodes" 2 250
check_number --compute-ms "$compute_ms" 0 100000
check_number --iters "$iters" 1 1000
check_number --rounds "$rounds" 1 100
check_number --cnn-epochs "$cnn_epochs" 1 100
for framework in "${framework_list[@]}"; do
  case $framework in
    ringd | horovod | ddp | ddp-ringd) ;;
    *) echo "$bench_name: --frameworks: unknown '$framework' (ringd, horovod, ddp, ddp-ringd)" >&2
      exit 2 ;;
  esac
done
for part in "${parts[@]}"; do
  case $part in
    synthetic | cnn | single) ;;
    *) echo "$bench_name: --only: unknown part '$part' (synthetic, cnn, single)" >&2; exit 2 ;;
  esac
done
wants() { [[ ",$only," == *",$1,"* ]]; }
uses() { [[ ",$frameworks," == *",$1,"* ]]; }
[[ $build_dir = /* ]] || build_dir=$repo/$build_dir
mkdir -p "$out"
rm -f "$out/runs.jsonl"

# ---- the environments ----
ensure_python_package
horovod_python=
if uses horovod && { wants synthetic || wants cnn; }; then
  horovod_python=$(bench/horovod_env.sh)
fi
write_meta "$command_line" "nodes=$nodes" "rates=$rates" "profile=$profile" \
  "compute_ms=$compute_ms" "iters=$iters" "rounds=$rounds" "cnn_epochs=$cnn_epochs" \
  "frameworks=$frameworks" \
  "torch=$("$python" -c 'import torch; print(torch.__version__)')" \
  "horovod_torch=${horovod_python:+$("$horovod_python" -c 'import torch; print(torch.__version__)')}"

synthetic_flags=(--profile "$profile" --compute-ms "$compute_ms" --num-iters "$iters"
  --num-batches-per-iter 5 --num-warmup-batches 3)

if wants single; then
  for framework in none ringd; do
    json=$out/single.$framework.json
    bench_log "single: synthetic_benchmark.py --framework $framework, one process"
    if env PYTHONPATH="$build_dir/python" "$python" examples/pytorch/synthetic_benchmark.py \
      --framework "$framework" "${synthetic_flags[@]}" --json "$json" >>"$out/single.log" 2>&1; then
      record_run single "$framework" none 1 "$json"
    else
      bench_log "single $framework failed (see $out/single.log)"
    fi
  done
fi

# run_job PART FRAMEWORK ROUND SCRIPT ARGS...: under mpirun across the nodes, one rank per node.
run_job() {
  local part=$1 framework=$2 round=$3 script=$4 json=$out/$1.$2.$rate.$3.json
  shift 4
  local interpreter=$python env_flags=(-x "PYTHONPATH=$build_dir/python")
  case $framework in
    ringd) env_flags+=(-x RINGD_TRANSPORT=tcp "${ringd_env[@]}") ;;
    horovod) interpreter=$horovod_python; env_flags=() ;;
    ddp) env_flags+=(-x MASTER_ADDR=10.77.0.1 -x MASTER_PORT=29500 -x GLOO_SOCKET_IFNAME=eth0) ;;
    ddp-ringd) env_flags+=(-x MASTER_ADDR=10.77.0.1 -x MASTER_PORT=29500 -x RINGD_TRANSPORT=tcp
      "${ringd_env[@]}") ;;
  esac
  bench_log "$part, $framework, $rate, round $round: $(basename "$script") $*"
  rm -f "$json"
  if timeout 1800 bench/cluster.sh exec 0 mpirun "${mpirun_common[@]}" "${env_flags[@]}" \
    --hostfile "$hostfile" -np "$nodes" --map-by node \
    "$interpreter" "$script" --framework "$framework" --json "$json" "$@" \
    </dev/null >>"$out/$part.log" 2>&1 && [[ -s $json ]]; then
    record_run "$part" "$framework" "$rate" "$round" "$json"
  else
    bench_log "$part $framework at $rate (round $round) failed (see $out/$part.log)"
  fi
}

if wants synthetic || wants cnn; then
  require_root
  ensure_packages openmpi-bin
  for rate in "${rate_list[@]}"; do
    cluster_up
    hostfile=$out/hostfile
    write_hostfile "$hostfile" 1
    set_mpirun_common
    if wants synthetic; then
      for ((round = 1; round <= rounds; round++)); do
        for framework in "${framework_list[@]}"; do
          run_job synthetic "$framework" "$round" examples/pytorch/synthetic_benchmark.py \
            "${synthetic_flags[@]}"
        done
      done
    fi
    if wants cnn; then
      for framework in "${framework_list[@]}"; do
        run_job cnn "$framework" 1 examples/pytorch/fashion_mnist.py --epochs "$cnn_epochs" \
          --threads 1
      done
    fi
    bench/cluster.sh down "$nodes"
  done
  trap - EXIT INT TERM
fi
finish_meta

find_plot_python
"$plot_python" bench/report_pytorch.py --out "$out" --meta "$out/meta.json"
bench_log "results in $out (table.md, runs.jsonl, meta.json, *.log)"
