#!/usr/bin/env bash
# Deep gradient compression against the dense ring (docs/performance.md, "Deep gradient
# compression"): speed on the emulated cluster, accuracy of the MLP and of the PyTorch CNN, the
# selection kernel's cost.
#
#   bench/compare_dgc.sh [--nodes N[,N...]] [--rate RATE] [--profiles P[,P...]] [--steps S]
#                        [--compute-ms C] [--seeds K] [--epochs E] [--sparsities S[,S...]]
#                        [--lr-schedule S] [--cnn-epochs E] [--cnn-sparsities S[,S...]]
#                        [--only PARTS] [--out DIR] [--build-dir DIR]
#
#   --nodes N,...   emulated node counts, one rank each (default 4,8)
#   --rate RATE     tc rate of every port (default 1gbit)
#   --profiles P,.. replayed networks (default resnet50,vgg16)
#   --steps S       timed steps per replay, after 2 warm-up steps (default 5)
#   --compute-ms C  modeled backward of the scaling runs (default 300; resnet50 only)
#   --seeds K       accuracy: seeds 1..K of each mode (default 3)
#   --epochs E      accuracy: epochs per run (default 10; DGC warms up over the first 4)
#   --sparsities S  accuracy: DGC's final sparsities (default 0.999,0.99)
#   --lr-schedule S accuracy, cnn: the learning-rate schedule of every run, constant or cosine
#                   (default cosine: the rate decays to 0 over the epochs, as in the paper's runs)
#   --cnn-epochs E  cnn: epochs per run (default 3; DGC warms up over the first)
#   --cnn-sparsities S  cnn: DGC's final sparsities (default 0.999)
#   --only PARTS    speed, accuracy, cnn, kernel, comma-separated (default all four)
#   --out DIR       results (default /tmp/ringd-dgc)
#   --build-dir DIR build directory holding ringd (default $RINGD_BUILD_DIR or build)
#
# speed: per node count and profile, `ringd bench replay` under mpirun over ringd's tcp transport,
#   --check'ed: dense (--compute-ms 0), dgc (--compute-ms 0) and, for resnet50, both again with
#   --compute-ms C (scaling efficiency = C / step). DGC runs at 99.9% (its steady state).
# accuracy: `ringd train` of the MLP on Fashion-MNIST, 4 ranks (inproc), the same flags for both
#   modes (--lr-schedule S) but --compression none | dgc (--dgc-sparsity S), seeds 1..K; every
#   epoch's test accuracy is kept.
# cnn: the same for PyTorch: examples/pytorch/fashion_mnist.py through ringd.torch, 4 ranks under
#   mpirun on this host (loopback), SGD with momentum 0.9 and the same --lr-schedule, dense or
#   --compression dgc (ringd.torch.Compression.dgc at each --cnn-sparsities, warm-up over one
#   epoch), seeds 1..K.
# kernel: build/bench/dgc_select_bench (selection + packing of 25 M floats).
# Then bench/report_dgc.py prints the tables and the verdicts of issue 16's acceptance lines into
# DIR/table.md (and DIR/accuracy.png, DIR/accuracy_cnn.png when matplotlib is there).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
bench_name=compare_dgc
# shellcheck source=bench/lib.sh
source bench/lib.sh
command_line="bench/compare_dgc.sh $*"

node_counts=4,8
rate=1gbit
profiles=resnet50,vgg16
steps=5
compute_ms=300
seeds=3
epochs=10
sparsities=0.999,0.99
lr_schedule=cosine
cnn_epochs=3
cnn_sparsities=0.999
only=speed,accuracy,cnn,kernel
out=/tmp/ringd-dgc
build_dir=${RINGD_BUILD_DIR:-build}

usage() {
  sed -n '2,39p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --nodes) node_counts=${2:?}; shift 2 ;;
    --rate) rate=${2:?}; shift 2 ;;
    --profiles) profiles=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --compute-ms) compute_ms=${2:?}; shift 2 ;;
    --seeds) seeds=${2:?}; shift 2 ;;
    --epochs) epochs=${2:?}; shift 2 ;;
    --sparsities) sparsities=${2:?}; shift 2 ;;
    --lr-schedule) lr_schedule=${2:?}; shift 2 ;;
    --cnn-epochs) cnn_epochs=${2:?}; shift 2 ;;
    --cnn-sparsities) cnn_sparsities=${2:?}; shift 2 ;;
    --only) only=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --build-dir) build_dir=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    *) echo "$bench_name: unknown argument '$1'" >&2; usage ;;
  esac
done
IFS=, read -r -a node_list <<<"$node_counts"
IFS=, read -r -a profile_list <<<"$profiles"
IFS=, read -r -a parts <<<"$only"
IFS=, read -r -a sparsity_list <<<"$sparsities"
IFS=, read -r -a cnn_sparsity_list <<<"$cnn_sparsities"
for n in "${node_list[@]}"; do check_number --nodes "$n" 2 250; done
check_number --steps "$steps" 1 100000
check_number --compute-ms "$compute_ms" 0 100000
check_number --seeds "$seeds" 1 100
check_number --epochs "$epochs" 1 1000
check_number --cnn-epochs "$cnn_epochs" 1 1000
case $lr_schedule in
  constant | cosine) ;;
  *) echo "$bench_name: --lr-schedule: '$lr_schedule' is not constant or cosine" >&2; exit 2 ;;
esac
for part in "${parts[@]}"; do
  case $part in
    speed | accuracy | cnn | kernel) ;;
    *) echo "$bench_name: --only: unknown part '$part' (speed, accuracy, cnn, kernel)" >&2
      exit 2 ;;
  esac
done
wants() { [[ ",$only," == *",$1,"* ]]; }
[[ $build_dir = /* ]] || build_dir=$repo/$build_dir
ringd=$build_dir/bin/ringd
ensure_built "$build_dir" ringd
mkdir -p "$out"
nodes=${node_list[0]}
write_meta "$command_line" "rate=$rate" "steps=$steps" "compute_ms=$compute_ms" "seeds=$seeds" \
  "epochs=$epochs" "sparsities=$sparsities" "lr_schedule=$lr_schedule" "cnn_epochs=$cnn_epochs" \
  "cnn_sparsities=$cnn_sparsities" "nodes=$node_counts" "profiles=$profiles"

if wants kernel; then
  ensure_built "$build_dir" dgc_select_bench || true
  if [[ -x $build_dir/bench/dgc_select_bench ]]; then
    bench_log "kernel: dgc_select_bench"
    "$build_dir/bench/dgc_select_bench" --benchmark_min_time=1 --benchmark_format=json \
      >"$out/kernel.json"
  else
    bench_log "kernel: dgc_select_bench is not built (google-benchmark missing?): skipped"
  fi
fi

if wants accuracy; then
  rm -f "$out/accuracy.jsonl"
  for ((seed = 1; seed <= seeds; seed++)); do
    for mode in none "${sparsity_list[@]/#/dgc-}"; do
      json=$out/train.$mode.$seed.json
      flags=(--compression none)
      [[ $mode == none ]] || flags=(--compression dgc --dgc-sparsity "${mode#dgc-}")
      bench_log "accuracy: ringd train ${flags[*]} --seed $seed --epochs $epochs" \
        "--lr-schedule $lr_schedule"
      "$ringd" train --transport inproc --ranks 4 --epochs "$epochs" --seed "$seed" \
        --lr-schedule "$lr_schedule" "${flags[@]}" --json "$json" >>"$out/train.log" 2>&1
      python3 - "$json" "$mode" "$seed" >>"$out/accuracy.jsonl" <<'EOF'
import json, sys
path, mode, seed = sys.argv[1:]
run = json.load(open(path))
print(json.dumps({"model": "mlp", "mode": mode, "seed": int(seed),
                  "test_accuracy": run["test_accuracy"], "epochs": run["epochs"],
                  "lr_schedule": run["lr_schedule"], "train_seconds": run["train_seconds"]}))
EOF
    done
  done
fi

if wants cnn; then
  ensure_packages openmpi-bin
  ensure_python_package
  rm -f "$out/cnn.jsonl" "$out/cnn.log"
  for ((seed = 1; seed <= seeds; seed++)); do
    for mode in none "${cnn_sparsity_list[@]/#/dgc-}"; do
      json=$out/cnn.$mode.$seed.json
      flags=(--compression none)
      [[ $mode == none ]] || flags=(--compression dgc --dgc-sparsity "${mode#dgc-}")
      bench_log "cnn: fashion_mnist.py ${flags[*]} --seed $seed --epochs $cnn_epochs"
      rm -f "$json"
      if timeout 3600 mpirun --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1 \
        -np 4 -x "PYTHONPATH=$build_dir/python" -x RINGD_TRANSPORT=tcp -x RINGD_IFACE=lo \
        "$python" examples/pytorch/fashion_mnist.py --optimizer sgd --momentum 0.9 \
        --lr-schedule "$lr_schedule" --epochs "$cnn_epochs" --seed "$seed" --threads 1 \
        "${flags[@]}" --json "$json" </dev/null >>"$out/cnn.log" 2>&1 && [[ -s $json ]]; then
        python3 - "$json" "$mode" "$seed" >>"$out/cnn.jsonl" <<'EOF'
import json, sys
path, mode, seed = sys.argv[1:]
run = json.load(open(path))
epochs = [{"epoch": e["epoch"], "test_accuracy": e["test_accuracy"]} for e in run["epochs"]]
print(json.dumps({"model": "cnn", "mode": mode, "seed": int(seed),
                  "test_accuracy": epochs[-1]["test_accuracy"], "epochs": epochs,
                  "lr_schedule": run["lr_schedule"],
                  "train_seconds": sum(e["train_s"] for e in run["epochs"])}))
EOF
      else
        bench_log "cnn $mode seed $seed failed (see $out/cnn.log)"
      fi
    done
  done
fi

if wants speed; then
  require_root
  ensure_packages openmpi-bin
  rm -f "$out/runs.jsonl" "$out/replay.log"
  replay() { # name profile replay-flags...   (appends one tagged JSON line to runs.jsonl)
    local name=$1 profile=$2 json=$out/$1.$2.n$nodes.json
    shift 2
    bench_log "$name, $profile, $nodes nodes: ringd bench replay $*"
    rm -f "$json"
    if ! timeout 900 bench/cluster.sh exec 0 mpirun "${mpirun_common[@]}" "${ringd_env[@]}" \
      --hostfile "$hostfile" -np "$nodes" --map-by node \
      "$ringd" bench replay --transport tcp --iface eth0 --profile "$profile" --steps "$steps" \
      --baseline-iters 1 --check --json "$json" "$@" </dev/null >>"$out/replay.log" 2>&1; then
      bench_log "$name failed (see $out/replay.log)"
      return 1
    fi
    python3 - "$json" "$name" >>"$out/runs.jsonl" <<'EOF'
import json, sys
path, name = sys.argv[1:]
run = json.loads(open(path).read().splitlines()[-1])
run.update({"run": name})
print(json.dumps(run))
EOF
  }
  for n in "${node_list[@]}"; do
    nodes=$n
    cluster_up
    hostfile=$out/hostfile
    write_hostfile "$hostfile" 1
    set_mpirun_common
    for profile in "${profile_list[@]}"; do
      replay dense "$profile" --compute-ms 0
      replay dgc "$profile" --compute-ms 0 --compression dgc
      if [[ $profile == resnet50 ]] && ((compute_ms > 0)); then
        replay dense-compute "$profile" --compute-ms "$compute_ms"
        replay dgc-compute "$profile" --compute-ms "$compute_ms" --compression dgc
      fi
    done
    bench/cluster.sh down "$nodes"
  done
  trap - EXIT INT TERM
fi
finish_meta

find_plot_python
"$plot_python" bench/report_dgc.py --out "$out" --meta "$out/meta.json"
bench_log "results in $out (table.md, runs.jsonl, accuracy.jsonl, cnn.jsonl, kernel.json," \
  "meta.json)"
