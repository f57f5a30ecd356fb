#!/usr/bin/env bash
# Training throughput: ring allreduce against parameter servers on the same model, data and
# network (docs/performance.md, "Training: allreduce against parameter servers").
#
#   bench/compare_training.sh [--nodes LIST] [--rates LIST] [--workloads LIST] [--systems LIST]
#                             [--steps S] [--ps-servers K] [--compute-ms P=MS,...] [--epochs E]
#                             [--target-accuracy A] [--out DIR] [--build-dir DIR]
#
#   --nodes LIST       worker nodes, comma-separated (default 1,2,4,8)
#   --rates LIST       tc rates of every port (default 1gbit,10gbit)
#   --workloads LIST   mlp (Fashion-MNIST), resnet50, vgg16, bert_base, inception_v3 (replay)
#                      (default mlp,resnet50,vgg16,bert_base)
#   --systems LIST     allreduce   ringd train --mode allreduce (fusion engine, ring over tcp)
#                      ps1         one parameter server on its own node
#                      psk         K servers on their own nodes, tensors sharded greedy by size
#                      ps-colo     K servers inside workers 0..K-1 (--ps-colocate K)
#                      (default all four)
#   --ps-servers K     servers of psk and ps-colo (default: as many as the workers)
#   --steps S          replay: timed steps (after 2 untimed) (default 6)
#   --compute-ms LIST  replay: modeled backward compute per profile, P=MS pairs (forward adds
#                      half of it) (default resnet50=1500,vgg16=600,bert_base=1500,
#                      inception_v3=1500: scaled to this arena, docs/performance.md says why)
#   --epochs E         mlp: epochs (default 3)
#   --target-accuracy A  mlp: time to this test accuracy (default 0.85)
#   --out DIR          results (default /tmp/ringd-training)
#   --build-dir DIR    build directory holding ringd (default $RINGD_BUILD_DIR or build)
#
# One emulated cluster per rate (bench/cluster.sh: max(nodes) worker namespaces plus K server
# namespaces), always taken down on exit. Workers run under mpirun in the worker namespaces; the
# servers of ps1/psk are `ringd ps` processes in namespaces of their own. Every run appends its
# `ringd train --json` summary, tagged, to DIR/runs.jsonl; bench/report_training.py then prints
# samples/s, scaling efficiency against one node (N-node samples/s / (N x the one-node allreduce
# run's, which has no communication)), communication share and, for the MLP, the time to the
# target accuracy, with the verdicts of issue 6's benchmark lines, and plots samples/s against
# nodes (DIR/training_<workload>_<rate>.png).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
bench_name=compare_training
# shellcheck source=bench/lib.sh
source bench/lib.sh
command_line="bench/compare_training.sh $*"

node_list=1,2,4,8
rate_list=1gbit,10gbit
workloads=mlp,resnet50,vgg16,bert_base
systems=allreduce,ps1,psk,ps-colo
ps_k=
steps=6
compute_list=resnet50=1500,vgg16=600,bert_base=1500,inception_v3=1500
epochs=3
target=0.85
out=/tmp/ringd-training
build_dir=${RINGD_BUILD_DIR:-build}
wait_idle=0

usage() {
  sed -n '2,36p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --nodes) node_list=${2:?}; shift 2 ;;
    --rates) rate_list=${2:?}; shift 2 ;;
    --workloads) workloads=${2:?}; shift 2 ;;
    --systems) systems=${2:?}; shift 2 ;;
    --ps-servers) ps_k=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --compute-ms) compute_list=${2:?}; shift 2 ;;
    --epochs) epochs=${2:?}; shift 2 ;;
    --target-accuracy) target=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --build-dir) build_dir=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    *) echo "$bench_name: unknown argument '$1'" >&2; usage ;;
  esac
done
IFS=, read -r -a node_counts <<<"$node_list"
IFS=, read -r -a rates <<<"$rate_list"
IFS=, read -r -a workload_names <<<"$workloads"
IFS=, read -r -a system_names <<<"$systems"
max_nodes=0
for n in "${node_counts[@]}"; do
  check_number --nodes "$n" 1 64
  ((n > max_nodes)) && max_nodes=$n
done
[[ -n $ps_k ]] && check_number --ps-servers "$ps_k" 1 64
check_number --steps "$steps" 1 100000
check_number --epochs "$epochs" 1 1000
for system in "${system_names[@]}"; do
  case $system in allreduce | ps1 | psk | ps-colo) ;; *)
    echo "$bench_name: unknown system '$system'" >&2; usage ;;
  esac
done
for workload in "${workload_names[@]}"; do
  case $workload in mlp | resnet50 | vgg16 | bert_base | inception_v3) ;; *)
    echo "$bench_name: unknown workload '$workload'" >&2; usage ;;
  esac
done
compute_ms() { # profile -> its --compute-ms
  local pair
  for pair in ${compute_list//,/ }; do
    [[ ${pair%%=*} == "$1" ]] && { echo "${pair#*=}"; return 0; }
  done
  echo "$bench_name: no --compute-ms for $1 (in '$compute_list')" >&2
  exit 2
}
[[ $build_dir = /* ]] || build_dir=$repo/$build_dir
require_root
ensure_packages openmpi-bin dataset-fashion-mnist
ringd=$build_dir/bin/ringd
ensure_built "$build_dir" ringd
mkdir -p "$out"
rm -f "$out/runs.jsonl" "$out/train.log"

# Servers of ps1/psk live after the workers: namespaces max_nodes .. max_nodes+K-1.
servers_for() { # system nodes -> how many dedicated or co-located servers
  case $1 in
    ps1) echo 1 ;;
    psk | ps-colo) echo "${ps_k:-$2}" ;;
    *) echo 0 ;;
  esac
}
max_servers=0
for n in "${node_counts[@]}"; do
  k=$(servers_for psk "$n")
  ((k > max_servers)) && max_servers=$k
done

server_pids=()
stop_servers() {
  local pid
  for pid in "${server_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${server_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  server_pids=()
}
bench_cleanup_extra() { stop_servers; }

run_one() { # rate workload system nodes   (appends one tagged summary to runs.jsonl)
  local rate=$1 workload=$2 system=$3 n=$4 k json=$out/run.json
  k=$(servers_for "$system" "$n")
  local -a train=("$ringd" train --transport tcp --iface eth0 --json "$json")
  if [[ $workload == mlp ]]; then
    train+=(--model mlp --epochs "$epochs")
  else
    train+=(--model replay --profile "$workload" --compute-ms "$(compute_ms "$workload")"
      --max-steps $((steps + 2)) --steps-per-epoch 1000000)
  fi
  local servers=
  case $system in
    ps1 | psk)
      local j
      for ((j = 0; j < k; j++)); do
        local node=$((max_nodes + j)) address
        address=10.77.0.$((node + 1)):7000
        servers+=${servers:+,}$address
        in_node "$node" env RINGD_JOB_SECRET="$secret" "$ringd" ps --listen "$address" \
          >>"$out/server.log" 2>&1 &
        server_pids+=($!)
      done
      train+=(--mode ps --ps-servers "$servers" --ps-sharding greedy)
      ;;
    ps-colo) train+=(--mode ps --ps-colocate "$k" --ps-sharding greedy) ;;
    allreduce) train+=(--mode allreduce) ;;
  esac
  write_hostfile "$out/hostfile" 1
  head -n "$n" "$out/hostfile" >"$out/hostfile.$n"
  bench_log "$rate $workload $system: $n worker node(s)${servers:+, servers $servers}"
  rm -f "$json"
  local status=0
  timeout 1800 bench/cluster.sh exec 0 mpirun "${mpirun_common[@]}" "${env_flags[@]}" \
    --hostfile "$out/hostfile.$n" -np "$n" --map-by node "${train[@]}" \
    </dev/null >>"$out/train.log" 2>&1 || status=$?
  stop_servers
  if ((status != 0)) || [[ ! -s $json ]]; then
    bench_log "$rate $workload $system $n: failed (exit $status; see $out/train.log)"
    failed+=("$rate/$workload/$system/$n")
    return 0
  fi
  python3 - "$json" "$rate" "$workload" "$system" "$n" "$k" >>"$out/runs.jsonl" <<'EOF'
import json, sys
path, rate, workload, system, nodes, servers = sys.argv[1:]
run = json.load(open(path))
run.update({"rate": rate, "workload": workload, "system": system, "nodes": int(nodes),
            "servers": int(servers)})
print(json.dumps(run))
EOF
}

failed=()
nodes=$((max_nodes + max_servers))
for rate in "${rates[@]}"; do
  cluster_up
  [[ -f $out/meta.json ]] || write_meta "$command_line" "steps=$steps" "epochs=$epochs" \
    "compute_ms=$compute_list" "target_accuracy=$target"
  set_mpirun_common
  # One secret for the workers (mpirun -x) and the servers started here.
  secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  env_flags=()
  for flag in "${ringd_env[@]}"; do
    [[ $flag == RINGD_JOB_SECRET=* ]] && flag=RINGD_JOB_SECRET=$secret
    env_flags+=("$flag")
  done
  for workload in "${workload_names[@]}"; do
    for n in "${node_counts[@]}"; do
      for system in "${system_names[@]}"; do
        # One node: the allreduce run is the no-communication baseline; ps1 still measures the
        # cost of a server; psk/ps-colo with one worker are the same as ps1.
        if ((n == 1)) && [[ $system == psk || $system == ps-colo ]]; then continue; fi
        run_one "$rate" "$workload" "$system" "$n"
      done
    done
  done
  bench/cluster.sh down "$nodes"
done
finish_meta

find_plot_python
"$plot_python" bench/report_training.py --runs "$out/runs.jsonl" --meta "$out/meta.json" \
  --table "$out/table.md" --png-dir "$out" --target-accuracy "$target"
bench_log "results in $out (table.md, training_*.png, runs.jsonl, train.log, server.log, meta.json)"
if ((${#failed[@]} > 0)); then
  bench_log "failed: ${failed[*]}"
  exit 1
fi
