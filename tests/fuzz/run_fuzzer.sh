#!/usr/bin/env bash
# Runs one libFuzzer harness for a while: first every seed and regression input (each must pass),
# then new inputs until SECONDS pass. New inputs that reach new code are kept in CORPUS (a build
# directory); a crash, a leak, a sanitizer report or a hang (-timeout) fails the run and leaves the
# input as crash-*/leak-*/timeout-* in the working directory, named in the output.
#
#   run_fuzzer.sh FUZZER SECONDS CORPUS SEEDS REGRESSIONS -- [libFuzzer flags...]
set -uo pipefail
fuzzer=$1 seconds=$2 corpus=$3 seeds=$4 regressions=$5
shift 5
[[ ${1:-} == -- ]] && shift
mkdir -p "$corpus" || exit 1
directories=("$corpus" "$seeds")
[[ -d $regressions ]] && directories+=("$regressions")
artifacts=$(dirname "$corpus")/artifacts/$(basename "$corpus")
mkdir -p "$artifacts" || exit 1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$fuzzer" "$@" -max_total_time="$seconds" -artifact_prefix="$artifacts/" "${directories[@]}" 2>&1 |
  tee "$log" | grep -E '^(INFO: seed corpus|#[0-9]+ +(INITED|DONE)|==[0-9]+==|SUMMARY|artifact_prefix|Test unit written|stat::)' 
status=${PIPESTATUS[0]}
executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
corpus_size=$(find "$corpus" -type f | wc -l)
name=$(basename "$fuzzer")
if ((status != 0)); then
  tail -n 60 "$log"
  echo "fuzz: $name: FAILED (exit $status) after ${executions:-?} executions; the input is in $artifacts"
  exit 1
fi
echo "fuzz: $name: ${executions:-?} executions in ${seconds} s, no failure; $corpus_size new inputs kept in $corpus"
