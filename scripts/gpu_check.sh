#!/usr/bin/env bash
# The GPU check: one unattended command for a machine with NVIDIA GPUs. It builds the CUDA variant
# exactly as scripts/test.sh does, runs the device tests, the hierarchical allreduce through the
# NCCL local group against the closed-form values (--check), the same sweep on CPU devices, the
# fusion engine over the NCCL group (bench replay --gpus --check), the MLP on cuBLAS against
# OpenBLAS, and `ringd train --gpus` (the MLP's replicas on the GPUs, the gradients averaged
# through the NCCL group) against the same global batch on CPU devices; then prints a report
# (GPUs, driver, CUDA and NCCL versions, busbw per size, samples/s, PASS/FAIL per step) and
# writes it to a file.
#
#   scripts/gpu_check.sh                 the whole check; exits 77 (skip) at once without a GPU
#   scripts/gpu_check.sh --build-only    build the CUDA variant and run what needs no GPU (device
#                                        tests, which skip; the CPU-device sweep; OpenBLAS training)
#   scripts/gpu_check.sh --skip-build    reuse the CUDA build directory as it is, installing and
#                                        compiling nothing (after a --build-only run where one
#                                        command's time is limited, or on a GPU machine with no
#                                        network, given a build made elsewhere)
#
#   RINGD_CUDA_BUILD_DIR=build-cuda               the CUDA build (the one test.sh makes)
#   RINGD_GPU_REPORT=<build-cuda>/gpu_check.txt   where the report goes
#   RINGD_GPU_CHECK_LOGS=<build-cuda>/gpu_check   every run's output
#   RINGD_GPU_CHECK_BUILD_TIMEOUT=3600            seconds for the build
#   RINGD_GPU_CHECK_RUN_TIMEOUT=300               seconds for each test, bench or train run
#   RINGD_GPU_CHECK_MAXBYTES=64M                  largest size of the busbw sweeps
#   RINGD_GPU_CHECK_TRAIN_STEPS=200               steps of each training run
#   RINGD_GPU_CHECK_DATA=                         Fashion-MNIST's directory for them (unset:
#                                                 ringd train's default, the Debian package's)
#   RINGD_GPU_CHECK_COMMIT=                       the commit the report names (unset: the
#                                                 checkout's; gpu_bundle.sh run: the build's)
#
# Exit status: 0 every step passed (or was skipped by --build-only), 1 a step failed, 77 no GPU
# (without --build-only), 2 a bad argument. Runs as root without prompts; uses no mpirun.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }

build_only=0
skip_build=0
for arg in "$@"; do
  case $arg in
    --build-only) build_only=1 ;;
    --skip-build) skip_build=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu_check: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

say() { echo "gpu_check: $*" >&2; }

# ---- 0. Is there a GPU? (before anything slow) ----
gpu_list=""
no_gpu_reason=""
if ! command -v nvidia-smi >/dev/null 2>&1; then
  no_gpu_reason="nvidia-smi not found"
elif ! smi_out=$(timeout 60 nvidia-smi --query-gpu=index,name,driver_version,memory.total \
  --format=csv,noheader 2>&1); then
  no_gpu_reason="nvidia-smi failed: $(head -n 1 <<<"$smi_out")"
elif ! grep -q '[^[:space:]]' <<<"$smi_out"; then
  no_gpu_reason="nvidia-smi lists no GPU"
else
  gpu_list=$smi_out
fi
if [[ -n $no_gpu_reason ]]; then
  if ((!build_only)); then
    say "no NVIDIA GPU visible: $no_gpu_reason; skipping (exit 77). Run with --build-only to build the CUDA variant and run what needs no GPU."
    exit 77
  fi
  say "no NVIDIA GPU visible: $no_gpu_reason; --build-only: building and running what needs no GPU"
fi
gpus=$(grep -c '[^[:space:]]' <<<"$gpu_list" || true)
if [[ -n ${CUDA_VISIBLE_DEVICES:-} && $gpus -gt 0 ]]; then  # what CUDA will see
  IFS=, read -r -a visible <<<"$CUDA_VISIBLE_DEVICES"
  ((${#visible[@]} < gpus)) && gpus=${#visible[@]}
fi
use_gpu=$((gpus > 0 && !build_only))

cuda_build_dir=${RINGD_CUDA_BUILD_DIR:-build-cuda}
report=${RINGD_GPU_REPORT:-$cuda_build_dir/gpu_check.txt}
logs=${RINGD_GPU_CHECK_LOGS:-$cuda_build_dir/gpu_check}
build_timeout=${RINGD_GPU_CHECK_BUILD_TIMEOUT:-3600}
run_timeout=${RINGD_GPU_CHECK_RUN_TIMEOUT:-300}
max_bytes=${RINGD_GPU_CHECK_MAXBYTES:-64M}
train_steps=${RINGD_GPU_CHECK_TRAIN_STEPS:-200}
data_args=()
[[ -n ${RINGD_GPU_CHECK_DATA:-} ]] && data_args=(--data "$RINGD_GPU_CHECK_DATA")
ringd=$cuda_build_dir/bin/ringd
mkdir -p "$logs" "$(dirname "$report")"
rm -f "$logs"/bench-*.jsonl "$logs"/train-* "$logs"/replay-*

if ((EUID == 0)); then  # in case anything reaches Open MPI
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

started=$SECONDS
results=()  # "PASS|FAIL|SKIP<TAB>step<TAB>note"
failed=0
finished=0
versions=()
figures=""

# record RESULT STEP NOTE: one line of the report; rewrites the report so a killed run leaves one
record() {
  results+=("$1"$'\t'"$2"$'\t'"${3//$'\n'/ | }")
  [[ $1 == FAIL ]] && failed=1
  say "$2: $1${3:+ ($3)}"
  write_report
}

write_report() {
  {
    echo "ringd GPU check (scripts/gpu_check.sh$( ((build_only)) && echo ' --build-only')$(
      ((skip_build)) && echo ' --skip-build')) at" \
      "${RINGD_GPU_CHECK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}, $(date -u '+%Y-%m-%d %H:%M UTC'), host $(hostname)"
    if [[ -n $gpu_list ]]; then
      echo "GPUs (nvidia-smi: index, name, driver, memory):"
      # shellcheck disable=SC2001  # indents every line
      sed 's/^/  /' <<<"$gpu_list"
    else
      echo "GPUs: none visible ($no_gpu_reason)"
    fi
    ((${#versions[@]})) && printf '%s\n' "${versions[@]}"
    echo
    echo "steps:"
    local line result step note
    for line in "${results[@]}"; do
      IFS=$'\t' read -r result step note <<<"$line"
      printf '  %-4s  %s%s\n' "$result" "$step" "${note:+: $note}"
    done
    [[ -n $figures ]] && printf '\n%s\n' "$figures"
    echo
    local elapsed=$((SECONDS - started))
    local result=PASS
    ((failed)) && result=FAIL
    ((finished || failed)) || result="INCOMPLETE (still running, or killed)"
    echo "RESULT: $result ($((elapsed / 60))m$((elapsed % 60))s; logs in $logs)"
  } >"$report.tmp"
  mv "$report.tmp" "$report"
}

# shellcheck disable=SC2317  # reached through the trap
interrupted() {
  record FAIL "interrupted" "signal received during the run"
  exit 1
}
trap interrupted INT TERM

# run_logged LOG SECONDS COMMAND...: runs it bounded in time, stdout+stderr into LOG; its status
# (124 when it timed out)
run_logged() {
  local log=$1 seconds=$2
  shift 2
  echo "+ $*" >"$log"
  local rc=0
  timeout --kill-after=20 "$seconds" "$@" >>"$log" 2>&1 || rc=$?
  return "$rc"
}

why_failed() {  # why_failed STATUS LOG SECONDS: a short reason
  if (($1 == 124 || $1 == 137)); then
    echo "timed out after $3 s (see $2)"
  else
    echo "exit $1: $(awk '!/^[#+]/ && tolower($0) ~ /error|fail|wrong/ { print; found = 1; exit }
      { last = $0 } END { if (!found) print last }' "$2") (see $2)"
  fi
}

# ---- 1. dependencies and the CUDA build (test.sh's call) ----
if ((skip_build)); then
  # The build was made (and its dependencies installed) elsewhere; this machine may have no
  # network at all.
  record SKIP "install dependencies" "--skip-build"
else
  say "step: install dependencies"
  rc=0
  run_logged "$logs/install_deps.log" 900 scripts/install_deps.sh || rc=$?
  if ((rc == 0)); then
    record PASS "install dependencies" ""
  else
    record FAIL "install dependencies" "$(why_failed "$rc" "$logs/install_deps.log" 900)"
  fi
fi

nvcc=${CUDACXX:-}
[[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
[[ -z $nvcc ]] && nvcc=$(command -v nvcc || true)
device_tests=()
for source in tests/device/*_test.cc; do
  [[ -e $source ]] && device_tests+=("$(basename "$source" .cc)")
done
built=0
if [[ -n $nvcc && -x $nvcc ]]; then
  versions+=("nvcc: $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\), \(V[0-9.]*\).*/\1 (\2)/p')")
fi
if ((skip_build)); then  # needs no nvcc: the build was made elsewhere
  built=1
  [[ -x $ringd ]] || { built=0; record FAIL "CUDA build ($cuda_build_dir)" "--skip-build but no $ringd"; }
elif [[ ! -x $nvcc ]]; then
  record FAIL "CUDA build ($cuda_build_dir)" "no nvcc (CUDACXX${CUDACXX:+=$CUDACXX}, /usr/local/cuda/bin/nvcc or PATH)"
else
  say "step: CUDA build ($cuda_build_dir; up to $build_timeout s)"
  step_start=$SECONDS
  rc=0
  run_logged "$logs/build.log" "$build_timeout" env RINGD_BUILD_DIR="$cuda_build_dir" \
    RINGD_BUILD_TARGETS="ringd ${device_tests[*]}" scripts/build.sh \
    -DRINGD_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DRINGD_BUILD_BENCH=OFF || rc=$?
  if ((rc == 0)); then
    built=1
    record PASS "CUDA build ($cuda_build_dir)" "$((SECONDS - step_start)) s"
  else
    record FAIL "CUDA build ($cuda_build_dir)" "$(why_failed "$rc" "$logs/build.log" "$build_timeout")"
  fi
fi

config_h=$cuda_build_dir/generated/ringd/config.h
have() { grep -q "define RINGD_HAVE_$1 1" "$config_h" 2>/dev/null; }
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$cuda_build_dir/CMakeCache.txt" 2>/dev/null | head -n 1; }
if ((built)); then
  nccl_h="$(cache_value RINGD_NCCL_INCLUDE)/nccl.h"
  nccl_lib=$(cache_value RINGD_NCCL_LIBRARY)
  if [[ -f $nccl_h ]]; then
    nccl_header=$(awk '/define NCCL_(MAJOR|MINOR|PATCH) /{v = v (v ? "." : "") $3} END {print v}' "$nccl_h")
    versions+=("NCCL (build): header $nccl_header ($nccl_h), library $(readlink -f "$nccl_lib" 2>/dev/null || echo "$nccl_lib")")
  fi
  versions+=("build: $(grep -o 'RINGD_HAVE_[A-Z]* [01]' "$config_h" 2>/dev/null | sed 's/RINGD_HAVE_//' | tr '\n' ' ')")
  linked=$(ldd "$ringd" 2>/dev/null | awk '/nccl|cublas|cudart/ {print $3}' | xargs -r readlink -f | xargs -r -n 1 basename | tr '\n' ' ' || true)
  [[ -n $linked ]] && versions+=("ringd links: $linked")
  if ((use_gpu)) && ! have NCCL; then
    record FAIL "NCCL in the build" "$config_h says RINGD_HAVE_NCCL 0: NCCL not found (set NCCL_HOME)"
  fi
fi
if [[ -n $gpu_list ]]; then
  driver_cuda=$(timeout 60 nvidia-smi 2>/dev/null | grep -o 'CUDA Version: *[0-9.]*' | head -n 1 || true)
  versions+=("driver: ${driver_cuda:-CUDA Version unknown} (the newest CUDA the driver supports)")
fi

# ---- 2. device tests ----
if ((built)); then
  say "step: device tests (${device_tests[*]})"
  regex="^($(IFS='|'; echo "${device_tests[*]}"))\$"
  rc=0
  run_logged "$logs/device_tests.log" "$((run_timeout * 3))" \
    ctest --test-dir "$cuda_build_dir" --output-on-failure -j 1 -R "$regex" || rc=$?
  # ctest's summary: "75% tests passed, 1 tests failed out of 4"; newer ones say "100% tests
  # passed out of 4" when none failed
  counts=$(sed -n -e 's/^[0-9]*% tests passed, \([0-9]*\) tests failed out of \([0-9]*\)$/\1 \2/p' \
    -e 's/^100% tests passed out of \([0-9]*\)$/0 \1/p' "$logs/device_tests.log" | tail -n 1 |
    awk '{ printf "%d/%d passed", $2 - $1, $2 }')
  skipped=$(grep -m 1 -o 'no CUDA device: .*' "$cuda_build_dir/Testing/Temporary/LastTest.log" \
    2>/dev/null || true)
  if ((rc == 0)) && [[ -z $counts ]]; then
    record FAIL "device tests" "no device test ran (see $logs/device_tests.log)"
  elif ((rc != 0)); then
    record FAIL "device tests" "${counts:+$counts; }$(why_failed "$rc" "$logs/device_tests.log" "$((run_timeout * 3))")"
  elif ((use_gpu)) && [[ -n $skipped ]]; then
    record FAIL "device tests" "$counts, but the GPU tests skipped although nvidia-smi lists GPUs: $skipped"
  else
    record PASS "device tests" "${counts:-ctest passed}${skipped:+ (GPU tests skipped: $skipped)}"
  fi
fi

# ---- 3. hierarchical allreduce: NCCL local group and CPU devices, --check ----
local_devices=$((gpus > 0 ? gpus : 2))
# bench_run NAME KIND NODES HIERARCHY [ARGS...]: one sweep of `ringd bench allreduce`; KIND nccl
# or cpu is the local group the header must name (cpu: CUDA sees no device)
bench_run() {
  local name=$1 kind=$2 nodes=$3 hierarchy=$4
  shift 4
  local log=$logs/bench-$name.txt json=$logs/bench-$name.jsonl rc=0
  local env_args=(NCCL_DEBUG=VERSION)
  [[ $kind == cpu ]] && env_args=(CUDA_VISIBLE_DEVICES=-1)
  say "step: allreduce $name"
  run_logged "$log" "$run_timeout" env "${env_args[@]}" "$ringd" bench allreduce \
    --transport inproc --ranks "$nodes" --local-devices "$local_devices" --hierarchy "$hierarchy" \
    --check --timeout 120 --json "$json" "$@" || rc=$?
  local got_kind rows wrong
  got_kind=$(sed -n 's/^# nodes: .*local devices: [0-9]* (\([a-z]*\)).*/\1/p' "$log" | head -n 1)
  rows=$(grep -c '"bytes"' "$json" 2>/dev/null || true)
  wrong=$(grep -o '"wrong":[0-9]*' "$json" 2>/dev/null | awk -F: '{ s += $2 } END { print s + 0 }')
  local plural=s what
  ((nodes == 1)) && plural=""
  what="$nodes node$plural x $local_devices $kind devices, $hierarchy, ${rows:-0} sizes, $wrong wrong"
  if ((rc != 0)); then
    record FAIL "allreduce $name" "$what; $(why_failed "$rc" "$log" "$run_timeout")"
  elif [[ $got_kind != "$kind" ]]; then
    record FAIL "allreduce $name" "ran on '${got_kind:-?}' devices, not $kind (see $log)"
  elif ((rows == 0 || wrong != 0)) || ! grep -q '^# Out of bounds values : 0 OK' "$log"; then
    record FAIL "allreduce $name" "$what (see $log)"
  else
    record PASS "allreduce $name" "$what"
  fi
}

if ((built)); then
  sweep=(-b 4K -e "$max_bytes" -f 4)
  for nodes in 1 2; do
    for hierarchy in reduce-bcast rs-ag; do
      if ((use_gpu)); then
        bench_run "nccl-${nodes}node-$hierarchy" nccl "$nodes" "$hierarchy" "${sweep[@]}"
      fi
      bench_run "cpu-${nodes}node-$hierarchy" cpu "$nodes" "$hierarchy" "${sweep[@]}"
    done
  done
  if ((use_gpu)); then
    # Every NCCL type mapping, and sizes that do not split evenly over the devices.
    for dtype_op in half:avg bfloat16:max int32:prod double:min; do
      bench_run "nccl-${dtype_op/:/-}" nccl 1 rs-ag -b 1000 -e 1000000 -f 10 \
        --dtype "${dtype_op%:*}" --op "${dtype_op#*:}" --iters 5 --warmup 1
    done
    nccl_runtime=$(grep -h -m 1 -o 'NCCL version [^ ]*' "$logs"/bench-nccl-*.txt 2>/dev/null | head -n 1 || true)
    versions+=("NCCL (runtime): ${nccl_runtime:-not printed (NCCL_DEBUG=VERSION)}")
  else
    record SKIP "allreduce on the NCCL local group" "no GPU"
  fi
  ((gpus == 1 && use_gpu)) && versions+=("note: one GPU only: the NCCL group has 1 device (no GPU-to-GPU traffic)")
  figures=$(python3 - "$logs" <<'EOF' || true
import glob, json, os, re, sys
runs = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "bench-*.jsonl"))):
    m = re.match(r"bench-(nccl|cpu)-(\d)node-(.*)\.jsonl$", os.path.basename(path))
    if m:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        runs[(m[2], m[3], m[1])] = {r["bytes"]: r for r in rows}
print("allreduce busbw (GB/s; float sum, inproc, --check; time in us):")
print(f"  {'nodes':>5}  {'hierarchy':<12} {'size (B)':>10}  {'nccl busbw':>10}  {'cpu busbw':>9}"
      f"  {'nccl time':>9}  {'cpu time':>9}")
for nodes, hierarchy in sorted({(n, h) for n, h, _ in runs}):
    nccl, cpu = runs.get((nodes, hierarchy, "nccl"), {}), runs.get((nodes, hierarchy, "cpu"), {})
    for size in sorted(set(nccl) | set(cpu)):
        cell = lambda run, key, fmt: format(run[size][key], fmt) if size in run else "-"
        print(f"  {nodes:>5}  {hierarchy:<12} {size:>10}  {cell(nccl, 'busbw_GBps', '.3f'):>10}"
              f"  {cell(cpu, 'busbw_GBps', '.3f'):>9}  {cell(nccl, 'time_us', '.1f'):>9}"
              f"  {cell(cpu, 'time_us', '.1f'):>9}")
EOF
  )
  write_report
fi

# ---- 3b. the fusion engine over the NCCL group: ResNet-50's gradients in GPU memory ----
# replay_run HIERARCHY: `ringd bench replay --gpus --check` on 2 in-process nodes
replay_run() {
  local hierarchy=$1 rc=0 log=$logs/replay-$1.txt json=$logs/replay-$1.jsonl
  say "step: engine over the NCCL group ($hierarchy)"
  run_logged "$log" "$run_timeout" "$ringd" bench replay --transport inproc --ranks 2 \
    --local-devices "$local_devices" --gpus --hierarchy "$hierarchy" --profile resnet50 \
    --steps 3 --warmup-steps 1 --baseline-iters 1 --check --timeout 120 --json "$json" || rc=$?
  local what
  what=$(python3 -c 'import json, sys
s = [json.loads(line) for line in open(sys.argv[1]) if line.strip()][-1]
print("%s, %d steps: %.1f ms per step, one-buffer %.1f ms, %d wrong"
      % (s["profile"], len(s["steps"]), sum(t["step_ms"] for t in s["steps"]) / len(s["steps"]),
         s["one_buffer_ms"], s["wrong"]))' "$json" 2>/dev/null || true)
  if ((rc != 0)); then
    record FAIL "engine over the NCCL group ($hierarchy)" "${what:+$what; }$(why_failed "$rc" "$log" "$run_timeout")"
  elif ! grep -q 'GPU device' "$log" || [[ $what != *", 0 wrong" ]]; then
    record FAIL "engine over the NCCL group ($hierarchy)" "${what:-no summary} (see $log)"
  else
    record PASS "engine over the NCCL group ($hierarchy)" "$what"
  fi
}

if ((built)); then
  if ((use_gpu)); then
    replay_run reduce-bcast
    replay_run rs-ag
  else
    record SKIP "engine over the NCCL group" "no GPU"
  fi
fi

# ---- 4. the MLP: cuBLAS against OpenBLAS; ringd train over the NCCL group against CPU devices ----
# train_run NAME LABEL EXPECT ARGS...: a short `ringd train` (ARGS say the ranks, --blas,
# devices); the JSON summary and the final parameters in $logs/train-NAME.*; records FAIL for a
# failed run or a summary without each KEY=VALUE of EXPECT (space-separated), else PASS with its
# figures
train_run() {
  local name=$1 label=$2 expect=$3 rc=0 log=$logs/train-$1.txt
  shift 3
  say "step: $label ($train_steps steps)"
  run_logged "$log" "$run_timeout" "$ringd" train --transport inproc --epochs 1 \
    --max-steps "$train_steps" --test-limit 2000 --log-every 100 --seed 42 \
    ${data_args[@]+"${data_args[@]}"} --timeout 120 --json "$logs/train-$name.json" \
    --params-out "$logs/train-$name.params" "$@" || rc=$?
  if ((rc != 0)); then
    record FAIL "$label" "$(why_failed "$rc" "$log" "$run_timeout")"
    return 1
  fi
  local pair
  for pair in $expect; do
    if ! grep -q "\"${pair%%=*}\": *\"${pair#*=}\"" "$logs/train-$name.json" 2>/dev/null; then
      record FAIL "$label" "the summary does not say ${pair%%=*} ${pair#*=} (see $logs/train-$name.json)"
      return 1
    fi
  done
  record PASS "$label" "$(python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))
print("%.0f samples/s, last loss %.4f, test accuracy %.4f"
      % (s["samples_per_second"], s["last_loss"], s["test_accuracy"]))' \
    "$logs/train-$name.json" 2>/dev/null || echo "no summary")"
}

# compare_runs STEP A B: run A's final parameters, loss and accuracy against run B's. They round
# differently (cuBLAS against OpenBLAS; NCCL's order of the sums against the CPU group's), so
# they are compared within a tolerance, not bitwise.
compare_runs() {
  local step=$1 rc=0 comparison
  comparison=$(python3 - "$logs/train-$2" "$logs/train-$3" <<'EOF' 2>&1
import array, json, math, sys
a, b = (json.load(open(p + ".json")) for p in sys.argv[1:3])
pa, pb = (array.array("f", open(p + ".params", "rb").read()) for p in sys.argv[1:3])
if len(pa) != len(pb) or not pa:
    print(f"parameter files differ in size: {len(pa)} vs {len(pb)} floats"); sys.exit(1)
diff = [x - y for x, y in zip(pa, pb)]
rel = math.sqrt(sum(d * d for d in diff)) / max(math.sqrt(sum(y * y for y in pb)), 1e-30)
loss, acc = abs(a["last_loss"] - b["last_loss"]), abs(a["test_accuracy"] - b["test_accuracy"])
print(f"params relative L2 difference {rel:.2e} (max |diff| {max(map(abs, diff)):.2e}), "
      f"|loss diff| {loss:.2e}, |test accuracy diff| {acc:.4f}; "
      f"samples/s {a['samples_per_second']:.0f} vs {b['samples_per_second']:.0f}")
sys.exit(0 if rel <= 1e-3 and loss <= 1e-2 and acc <= 1e-2 else 1)
EOF
  ) || rc=$?
  if ((rc == 0)); then
    record PASS "$step" "$comparison"
  else
    record FAIL "$step" "$comparison (tolerance: params 1e-3, loss 1e-2, accuracy 1e-2)"
  fi
}

if ((built)); then
  openblas_ok=0
  train_run openblas "train --blas openblas" "blas=openblas" --ranks 1 --blas openblas &&
    openblas_ok=1
  if ((!use_gpu)); then
    record SKIP "train --blas cublas" "no GPU"
  elif ! have CUBLAS; then
    record FAIL "train --blas cublas" "$config_h says RINGD_HAVE_CUBLAS 0"
  elif train_run cublas "train --blas cublas" "blas=cublas" --ranks 1 --blas cublas &&
    ((openblas_ok)); then
    compare_runs "cublas against openblas" cublas openblas
  fi

  # The MLP over the NCCL group: 2 in-process nodes x L GPUs (replica d multiplies on GPU d, the
  # gradients are averaged in GPU memory), against the same global batch on 2 nodes x L CPU
  # devices; with one GPU both nodes use it (the group of one makes no NCCL call) and the
  # reference is 2 flat ranks.
  if ((!use_gpu)); then
    record SKIP "train --gpus" "no GPU"
  elif ! have NCCL || ! have CUBLAS; then
    record FAIL "train --gpus" "$config_h says RINGD_HAVE_NCCL or RINGD_HAVE_CUBLAS 0"
  else
    devices_ok=0
    if ((local_devices > 1)); then
      train_run cpu-devices "train, 2 nodes x $local_devices CPU devices" \
        "blas=openblas local_group=cpu" --ranks 2 --local-devices "$local_devices" \
        --hierarchy reduce-bcast --blas openblas && devices_ok=1
    else
      train_run cpu-devices "train, 2 flat ranks" "blas=openblas" --ranks 2 --blas openblas &&
        devices_ok=1
    fi
    if train_run gpus "train --gpus, 2 nodes x $local_devices GPU(s)" \
      "blas=cublas local_group=nccl" --ranks 2 --local-devices "$local_devices" \
      --hierarchy reduce-bcast --gpus --blas cublas &&
      ((devices_ok)); then
      compare_runs "train --gpus against CPU devices" gpus cpu-devices
    fi
  fi
fi

# ---- 5. the report ----
finished=1
write_report
echo
cat "$report"
say "report: $report"
exit "$failed"
