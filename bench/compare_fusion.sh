#!/usr/bin/env bash
# The fusion engine on the emulated cluster: a network's gradients (a replay profile) fused against
# tensor by tensor, and overlapped with a modeled backward pass (docs/performance.md, "Fusion").
#
#   bench/compare_fusion.sh [--nodes N] [--rate RATE] [--profile P] [--steps S] [--repeat R]
#                           [--local-devices L] [--out DIR] [--wait-idle PCT] [--build-dir DIR]
#
#   --nodes N       emulated nodes, one rank each (default 4)
#   --local-devices L  each node's rank drives L CPU devices: the engine runs over the hierarchy
#                   and the one-buffer figure is the hierarchical allreduce (default 1: flat)
#   --rate RATE     tc rate of every port (default 10gbit)
#   --profile P     resnet50, vgg16, bert_base, inception_v3 (default resnet50)
#   --steps S       timed steps per run, after 2 warm-up steps (default 10)
#   --repeat R      every run R times, interleaved; the table keeps each run's fastest round
#                   (default 3)
#   --out DIR       results (default /tmp/ringd-fusion-PROFILE-RATE-nN)
#   --wait-idle PCT before each round, wait (up to 5 min) until the CPUs are PCT% idle over 1 s
#   --build-dir DIR build directory holding ringd (default $RINGD_BUILD_DIR or build)
#
# Each run is one `ringd bench replay` under mpirun over ringd's tcp transport, every result
# --check'ed. First the line: one TCP stream node0 -> node1 (iperf3). Per round, in this order:
#   unfused     --no-fusion --compute-ms 0: every tensor its own allreduce (communication only)
#   fused       --compute-ms 0 --paired: the default fusion buffer (communication only), every
#               step after a one-buffer allreduce of the same bytes through the engine
#   uncached    --compute-ms 0 --no-cache: fused, every tensor through rank 0's coordinator
#   overlapped  --compute-ms C with C = this round's fused step time: the backward pass and the
#               communication overlap; ideal = max(C, one allreduce of all the bytes)
# then bench/report_fusion.py prints the table and the verdicts (fused step <= 1.10 x the one-buffer
# allreduce, <= 1.15 x over local devices: the median, over every round's steps, of each step over
# the one-buffer allreduce just before it; over local devices the per-node bytes on the wire must
# reach 0.9 x the line; overlapped step <= 1.15 x ideal; negotiation <= 2% of the overlapped step
# once cached), writing DIR/table.md, DIR/runs.jsonl and DIR/meta.json (with this command line).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
bench_name=compare_fusion
# shellcheck source=bench/lib.sh
source bench/lib.sh
command_line="bench/compare_fusion.sh $*"

nodes=4
rate=10gbit
profile=resnet50
steps=10
repeat=3
local_devices=1
wait_idle=0
out=
build_dir=${RINGD_BUILD_DIR:-build}

usage() {
  sed -n '2,32p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --nodes) nodes=${2:?}; shift 2 ;;
    --rate) rate=${2:?}; shift 2 ;;
    --profile) profile=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --repeat) repeat=${2:?}; shift 2 ;;
    --local-devices) local_devices=${2:?}; shift 2 ;;
    --wait-idle) wait_idle=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --build-dir) build_dir=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    *) echo "$bench_name: unknown argument '$1'" >&2; usage ;;
  esac
done
check_number --nodes "$nodes" 2 250
check_number --steps "$steps" 1 100000
check_number --repeat "$repeat" 1 100
check_number --local-devices "$local_devices" 1 64
check_number --wait-idle "$wait_idle" 0 100
out=${out:-/tmp/ringd-fusion-$profile-$rate-n$nodes-l$local_devices}
[[ $build_dir = /* ]] || build_dir=$repo/$build_dir
require_root
ensure_packages openmpi-bin iperf3
ringd=$build_dir/bin/ringd
ensure_built "$build_dir" ringd

cluster_up
measure_line
write_meta "$command_line" "nodes=$nodes" "rate=$rate" "profile=$profile" "steps=$steps" \
  "repeat=$repeat" "local_devices=$local_devices" "line_gbps=$line_gbps" \
  "wait_idle_percent=$wait_idle"
hostfile=$out/hostfile
write_hostfile "$hostfile" 1
set_mpirun_common
rm -f "$out/runs.jsonl" "$out/replay.log" "$out/idle.log"

replay() { # run-name round replay-flags...   (appends one JSON line, tagged, to runs.jsonl)
  local name=$1 round=$2 json=$out/$1.$2.json
  shift 2
  bench_log "$name (round $round): ringd bench replay --profile $profile $*"
  rm -f "$json"
  if ! timeout 600 bench/cluster.sh exec 0 mpirun "${mpirun_common[@]}" "${ringd_env[@]}" \
    --hostfile "$hostfile" -np "$nodes" --map-by node \
    "$ringd" bench replay --transport tcp --iface eth0 --profile "$profile" --steps "$steps" \
    --local-devices "$local_devices" --check --json "$json" "$@" </dev/null >>"$out/replay.log" 2>&1; then
    bench_log "$name failed (see $out/replay.log)"
    return 1
  fi
  python3 - "$json" "$name" "$round" >>"$out/runs.jsonl" <<'EOF'
import json, sys
path, name, round_ = sys.argv[1:]
run = json.loads(open(path).read().splitlines()[-1])
run.update({"run": name, "round": int(round_)})
print(json.dumps(run))
EOF
}

fused_ms() { # round -> the fused run's mean step time in ms (rounded to 0.1 ms)
  python3 - "$out/fused.$1.json" <<'EOF'
import json, sys
run = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print("%.1f" % run["mean_step_ms"])
EOF
}

for ((round = 1; round <= repeat; round++)); do
  await_idle "round $round"
  replay unfused "$round" --compute-ms 0 --no-fusion
  replay fused "$round" --compute-ms 0 --paired
  replay uncached "$round" --compute-ms 0 --no-cache
  compute=$(fused_ms "$round")
  replay overlapped "$round" --compute-ms "$compute"
done
finish_meta

python3 bench/report_fusion.py --runs "$out/runs.jsonl" --meta "$out/meta.json" \
  --table "$out/table.md"
bench_log "results in $out (table.md, runs.jsonl, replay.log, meta.json)"
