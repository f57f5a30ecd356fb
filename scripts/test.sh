#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs the whole test suite, and
# (where nvcc exists) builds the CUDA variant and runs its device tests. Ends with one summary line;
# exits non-zero if any step failed.
#
#   RINGD_BUILD_DIR=build          the main (CPU) build, where every test runs
#   RINGD_CUDA_BUILD_DIR=build-cuda  the CUDA variant: -DRINGD_WITH_CUDA=ON, compile + link, plus
#                                  the tests in tests/device (kernel tests skip without a GPU)
#   RINGD_SKIP_CUDA_BUILD=1        skip the CUDA variant
#   RINGD_TEST_JOBS=2              tests run in parallel (each test's timeout is set in CMake)
#   RINGD_SKIP_PYTHON=1            build and test without the Python package (no torch download)
#   RINGD_FUZZ_SECONDS=5           how long each libFuzzer harness runs (scripts/fuzz.sh, in
#                                  build-fuzz: clang with ASan + UBSan)
#   RINGD_SKIP_FUZZ=1              skip the fuzzers
#
# The main build is configured with -DRINGD_WITH_CUDA=OFF: CUDA is compiled once, in its own
# directory, instead of twice. scripts/demo.sh configures the main build the same way, so after the
# demo the tests only build what the demo did not. Extra arguments go to ctest (e.g. -R allreduce).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

build_dir=${RINGD_BUILD_DIR:-build}
cuda_build_dir=${RINGD_CUDA_BUILD_DIR:-build-cuda}
test_jobs=${RINGD_TEST_JOBS:-2}
started=$SECONDS
failures=()
notes=()

step() {  # step NAME COMMAND...: runs it, times it, records a failure
  local name=$1 step_start=$SECONDS
  shift
  echo "==== test.sh: $name" >&2
  if "$@"; then
    echo "==== test.sh: $name: ok ($((SECONDS - step_start)) s)" >&2
    return 0
  fi
  echo "==== test.sh: $name: FAILED ($((SECONDS - step_start)) s)" >&2
  failures+=("$name")
  return 1
}

# shellcheck disable=SC2317  # called through step
run_ctest() {  # run_ctest BUILD_DIR ARGS...: ctest with its output also kept in BUILD_DIR/ctest.log
  local dir=$1
  shift
  ctest --test-dir "$dir" --output-on-failure -j "$test_jobs" "$@" 2>&1 | tee "$dir/ctest.log"
}

# shellcheck disable=SC2317  # called through step
python_environment() {  # sets $python: the interpreter of scripts/python_env.sh's environment
  python=$(scripts/python_env.sh) && [[ -x $python ]]
}

join() {  # join SEPARATOR ITEMS...
  local separator=$1 first=${2:-}
  shift 2 || return 0
  printf '%s' "$first" "${@/#/$separator}"
}

ctest_counts() {  # ctest_counts LOG: "N/M tests passed" from ctest's closing line
  sed -n 's/^[0-9]*% tests passed, \([0-9]*\) tests failed out of \([0-9]*\)$/\1 \2/p' "$1" |
    tail -n 1 | awk '{ printf "%d/%d tests passed", $2 - $1, $2 }'
}

# Open MPI refuses to start as root unless told it may (CI runs as root).
if ((EUID == 0)); then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

if step "install dependencies" scripts/install_deps.sh; then
  echo "test.sh: $(cmake --version | head -n 1); $(c++ --version | head -n 1)" >&2

  # ---- the Python package's environment: torch, numpy, pytest, nanobind (pinned, reused) ----
  python_args=()
  if [[ ${RINGD_SKIP_PYTHON:-0} == 1 ]]; then
    notes+=("Python package skipped (RINGD_SKIP_PYTHON=1)")
  elif step "Python environment (scripts/python_env.sh)" python_environment; then
    # The extension ringd._core is built in the main build and tests/python runs as the ctest
    # python_tests, with this interpreter.
    python_args=(-DRINGD_BUILD_PYTHON=ON "-DPython_EXECUTABLE=$python")
  fi

  # ---- main build and the whole suite ----
  if step "build ($build_dir)" env RINGD_BUILD_DIR="$build_dir" scripts/build.sh \
    -DRINGD_WITH_CUDA=OFF "${python_args[@]}"; then
    step "tests ($build_dir)" run_ctest "$build_dir" "$@"
    notes+=("$(ctest_counts "$build_dir/ctest.log")")
  fi

  # ---- the decoders' fuzzers: a short run of each (scripts/fuzz.sh runs them long) ----
  fuzz_seconds=${RINGD_FUZZ_SECONDS:-5}
  if [[ ${RINGD_SKIP_FUZZ:-0} == 1 ]]; then
    notes+=("fuzzers skipped (RINGD_SKIP_FUZZ=1)")
  elif step "fuzzers (scripts/fuzz.sh --seconds $fuzz_seconds)" \
    scripts/fuzz.sh --seconds "$fuzz_seconds"; then
    notes+=("$(grep -c '^fuzz: .*no failure' "${RINGD_FUZZ_BUILD_DIR:-build-fuzz}/Testing/Temporary/LastTest.log") fuzzers ran ${fuzz_seconds} s each, no failure")
  fi

  # ---- CUDA variant: compile and link; device tests skip (with the reason) without a GPU ----
  nvcc=${CUDACXX:-}
  [[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
  [[ -z $nvcc ]] && nvcc=$(command -v nvcc || true)
  if [[ ${RINGD_SKIP_CUDA_BUILD:-0} == 1 ]]; then
    notes+=("CUDA variant skipped (RINGD_SKIP_CUDA_BUILD=1)")
  elif [[ -z $nvcc ]]; then
    notes+=("CUDA variant skipped (no nvcc)")
  else
    # Only what the CUDA configuration changes: the ringd binary (ringd_core with the CUDA kernels,
    # linked against cudart/NCCL/cuBLAS) and the tests in tests/device.
    device_tests=()
    for source in tests/device/*_test.cc; do
      [[ -e $source ]] && device_tests+=("$(basename "$source" .cc)")
    done
    cuda_targets="ringd ${device_tests[*]}"
    device_test_regex="^($(IFS='|'; echo "${device_tests[*]}"))\$"
    if step "CUDA build ($cuda_build_dir, $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/nvcc \1/p'))" \
      env RINGD_BUILD_DIR="$cuda_build_dir" RINGD_BUILD_TARGETS="$cuda_targets" scripts/build.sh \
      -DRINGD_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DRINGD_BUILD_BENCH=OFF; then
      step "device tests ($cuda_build_dir)" run_ctest "$cuda_build_dir" -R "$device_test_regex"
      skip_reason=$(grep -m 1 -o 'no CUDA device: .*' "$cuda_build_dir/Testing/Temporary/LastTest.log" \
        2>/dev/null || true)
      notes+=("CUDA variant built, device $(ctest_counts "$cuda_build_dir/ctest.log")${skip_reason:+ (GPU kernel tests skipped: $skip_reason)}")
    fi
  fi
fi

elapsed=$((SECONDS - started))
summary=$(join '; ' "${notes[@]}")
if ((${#failures[@]} == 0)); then
  echo "test.sh: PASSED in $((elapsed / 60))m$((elapsed % 60))s: $summary"
  exit 0
fi
failed=$(join ', ' "${failures[@]}")
echo "test.sh: FAILED in $((elapsed / 60))m$((elapsed % 60))s: $failed${summary:+ ($summary)}"
exit 1
