#!/usr/bin/env bash
# ringd.tensorflow / ringd.keras against TensorFlow's own MultiWorkerMirroredStrategy (its ring
# collectives) and ParameterServerStrategy (1 and 2 parameter servers: the seeds' architecture),
# and Horovod 0.28.1's TensorFlow binding where it builds, on the same scripts and the same
# emulated network (docs/performance.md, "TensorFlow: ringd, MultiWorkerMirroredStrategy,
# parameter servers"): examples/tensorflow/synthetic_benchmark.py and keras_fashion_mnist.py
# with --framework.
#
#   bench/compare_tensorflow.sh [--nodes N] [--rates R[,R...]] [--profile P] [--compute-ms C]
#                            [--iters I] [--rounds R] [--cnn-epochs E]
#                            [--frameworks F[,F...]] [--only PARTS] [--out DIR]
#                            [--build-dir DIR]
#
#   --nodes N        emulated worker nodes, one rank each (default 4); the parameter-server
#                    layouts add 1 or 2 nodes of their own for the servers (a TFJob's PS pods)
#   --rates R,...    tc rates of every port (default 1gbit,10gbit)
#   --profile P      the synthetic model's gradient profile (default resnet50)
#   --compute-ms C   the synthetic model's modeled forward + backward per step (default 0: the
#                    communication alone, which parameter-server workers need: they cannot run
#                    the modeled compute's host functions)
#   --iters I        synthetic: timed iterations of 5 steps, after 3 warm-up steps (default 5)
#   --rounds R       synthetic: rounds per rate, the frameworks interleaved in each; the report
#                    compares the medians of the rounds (default 3)
#   --cnn-epochs E   CNN: epochs per run (default 1)
#   --frameworks F   ringd, mwms, ps1, ps2 (ParameterServerStrategy with 1 or 2 parameter
#                    servers) and horovod (default all five)
#   --only PARTS     synthetic, cnn, single, comma-separated (default all)
#   --out DIR        results (default /tmp/ringd-tensorflow)
#   --build-dir DIR  the build holding ringd's Python package (build/python; default
#                    $RINGD_BUILD_DIR or build)
#
# synthetic/cnn: per rate, each framework under the same mpirun line across the nodes, one rank
#   per node; ringd over its tcp transport (RINGD_TRANSPORT=tcp, eth0); MWMS and PS with the
#   TF_CONFIG the examples build from the nodes' addresses (PS: a worker on each of the N nodes,
#   the coordinator beside worker 0, and each parameter server on a node of its own, N+1 and
#   N+2: servers beside workers would give one worker free access to the variables, and the
#   asynchronous coordinator then hands that worker most steps). The synthetic benchmark runs
#   --rounds times per rate (ringd, mwms, ps1, ..., ringd, ...: on a shared machine one run's
#   figure moves by 10% and more), the CNN once (ringd on Keras 3, MWMS on tf_keras: Keras 3's
#   fit cannot run MWMS; PS has no CNN run: Keras 3's fit has no ParameterServerStrategy).
# single: one process, no network: plain TensorFlow (--framework none) against ringd on the
#   synthetic model (what one rank pays for going through ringd), --rounds interleaved rounds.
# Everything runs in scripts/python_env.sh's environment (tensorflow-cpu 2.21) but Horovod 0.28.1
# (horovod.tensorflow, MPI operations): bench/horovod_env.sh --tensorflow's, on tensorflow-cpu
# 2.15.1, the newest its TensorFlow binding builds against (that script says why not 2.21). Then bench/report_tensorflow.py writes DIR/table.md (with
# the acceptance verdicts) and DIR/tensorflow.png. The peers' sockets use the nodes' default TCP
# congestion control: the host's, or RINGD_CLUSTER_CONGESTION's (bench/cluster.sh); ringd's choose
# their own (RINGD_TCP_CONGESTION, reno). The table's last line says which.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
bench_name=compare_tensorflow
# shellcheck source=bench/lib.sh
source bench/lib.sh
command_line="bench/compare_tensorflow.sh $*"

nodes=4
rates=1gbit,10gbit
profile=resnet50
compute_ms=0
iters=5
rounds=3
cnn_epochs=1
frameworks=ringd,mwms,ps1,ps2,horovod
only=synthetic,cnn,single
out=/tmp/ringd-tensorflow
build_dir=${RINGD_BUILD_DIR:-build}

usage() {
  sed -n '2,45p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
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
    ringd | mwms | ps1 | ps2 | horovod) ;;
    *) echo "$bench_name: --frameworks: unknown '$framework' (ringd, mwms, ps1, ps2, horovod)" >&2
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
  horovod_python=$(bench/horovod_env.sh --tensorflow)
fi
write_meta "$command_line" "nodes=$nodes" "rates=$rates" "profile=$profile" \
  "compute_ms=$compute_ms" "iters=$iters" "rounds=$rounds" "cnn_epochs=$cnn_epochs" \
  "frameworks=$frameworks" \
  "tensorflow=$("$python" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)" \
  "horovod_tensorflow=${horovod_python:+$("$horovod_python" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)}"

synthetic_flags=(--profile "$profile" --compute-ms "$compute_ms" --num-iters "$iters"
  --num-batches-per-iter 5 --num-warmup-batches 3)

if wants single; then
  # --rounds rounds, the two interleaved: their medians are compared.
  for ((round = 1; round <= rounds; round++)); do
    for framework in none ringd; do
      json=$out/single.$framework.$round.json
      bench_log "single: synthetic_benchmark.py --framework $framework, one process, round $round"
      if env PYTHONPATH="$build_dir/python" RINGD_CACHE_DIR="$out/cache" TF_CPP_MIN_LOG_LEVEL=2 \
        "$python" examples/tensorflow/synthetic_benchmark.py --framework "$framework" \
        "${synthetic_flags[@]}" --json "$json" >>"$out/single.log" 2>&1; then
        record_run single "$framework" none "$round" "$json"
      else
        bench_log "single $framework failed (see $out/single.log)"
      fi
    done
  done
fi

# run_job PART FRAMEWORK ROUND SCRIPT ARGS...: under mpirun across the nodes, one rank per node.
run_job() {
  local part=$1 framework=$2 round=$3 script=$4 json=$out/$1.$2.$rate.$3.json
  shift 4
  local env_flags=(-x "PYTHONPATH=$build_dir/python" -x TF_CPP_MIN_LOG_LEVEL=2
    -x RINGD_CACHE_DIR="$out/cache") framework_flags=(--framework "$framework")
  local interpreter=$python
  local hosts ranks servers=0
  [[ $framework == ps* ]] && servers=${framework#ps}
  ranks=$((nodes + servers))
  hosts=$(seq -s, -f '10.77.0.%g' 1 "$ranks")
  case $framework in
    ringd) env_flags+=(-x RINGD_TRANSPORT=tcp "${ringd_env[@]}") ;;
    mwms) framework_flags+=(--hosts "$hosts" --tf-port 23456) ;;
    ps1 | ps2) framework_flags=(--framework ps --ps-tasks "$servers" --hosts "$hosts"
      --tf-port 23456) ;;
    horovod) interpreter=$horovod_python; env_flags=(-x TF_CPP_MIN_LOG_LEVEL=2) ;;
  esac
  bench_log "$part, $framework, $rate, round $round: $(basename "$script") $*"
  rm -f "$json"
  if timeout 1800 bench/cluster.sh exec 0 mpirun "${mpirun_common[@]}" "${env_flags[@]}" \
    --hostfile "$hostfile" -np "$ranks" --map-by node \
    "$interpreter" "$script" "${framework_flags[@]}" --json "$json" "$@" \
    </dev/null >>"$out/$part.log" 2>&1 && [[ -s $json ]]; then
    record_run "$part" "$framework" "$rate" "$round" "$json"
  else
    bench_log "$part $framework at $rate (round $round) failed (see $out/$part.log)"
  fi
}

if wants synthetic || wants cnn; then
  require_root
  ensure_packages openmpi-bin
  workers=$nodes
  # On an interrupted run too: the parameter servers' nodes as well (lib.sh's cluster_cleanup).
  bench_cleanup_extra() { bench/cluster.sh down "$((workers + 2))"; }
  for rate in "${rate_list[@]}"; do
    # Two more nodes for the parameter servers (idle in the other frameworks' runs).
    nodes=$((workers + 2))
    cluster_up
    hostfile=$out/hostfile
    write_hostfile "$hostfile" 1
    set_mpirun_common
    nodes=$workers
    if wants synthetic; then
      for ((round = 1; round <= rounds; round++)); do
        for framework in "${framework_list[@]}"; do
          run_job synthetic "$framework" "$round" examples/tensorflow/synthetic_benchmark.py \
            "${synthetic_flags[@]}"
        done
      done
    fi
    if wants cnn; then
      for framework in "${framework_list[@]}"; do
        [[ $framework == ps* ]] && continue  # no Keras 3 fit under ParameterServerStrategy
        run_job cnn "$framework" 1 examples/tensorflow/keras_fashion_mnist.py \
          --epochs "$cnn_epochs" --threads 1
      done
    fi
    bench/cluster.sh down "$((workers + 2))"
  done
  trap - EXIT INT TERM
fi
finish_meta

find_plot_python
"$plot_python" bench/report_tensorflow.py --out "$out" --meta "$out/meta.json"
bench_log "results in $out (table.md, runs.jsonl, meta.json, *.log)"
