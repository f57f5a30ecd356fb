#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz (clang, AddressSanitizer + UndefinedBehaviorSanitizer
# on the whole library) in their own build directory and runs each one for a while, in parallel.
# Every run starts with the seed corpus (tests/fuzz/corpus) and the inputs that once failed
# (tests/fuzz/regressions); new inputs that reach new code are kept in BUILD/fuzz-corpus and used
# again by the next run. Ends with one line per fuzzer (executions, failures) and exits non-zero
# when any failed; a failing input is left under BUILD/fuzz-corpus/artifacts.
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [NAME...]   NAME: checkpoint, store, ... (default: all)
#   scripts/fuzz.sh --seeds                              rewrite tests/fuzz/corpus from the encoders
#
#   --seconds N   how long each fuzzer runs (default 600: the long run; the test suite runs 5 s)
#   --jobs J      fuzzers at once (default: the number of CPUs)
#   RINGD_FUZZ_BUILD_DIR=build-fuzz
#
# A failure found: copy its input to tests/fuzz/regressions/<name>/, fix the code, and the input
# stays a test for good (docs/architecture.md, "Tests").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=600
jobs=$(nproc)
seeds=0
names=()
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --seeds) seeds=1; shift ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || { echo "fuzz.sh: --seconds takes a positive number" >&2; exit 2; }

build_dir=${RINGD_FUZZ_BUILD_DIR:-build-fuzz}
scripts/install_deps.sh
scripts/install_deps.sh clang libclang-rt-14-dev
clang_cc=$(command -v clang-14 || command -v clang)
clang_cxx=$(command -v clang++-14 || command -v clang++)

# A directory configured some other way (another compiler, no fuzzers) is configured anew.
if [[ -f $build_dir/CMakeCache.txt ]] &&
  ! grep -q '^RINGD_BUILD_FUZZERS:BOOL=ON$' "$build_dir/CMakeCache.txt"; then
  echo "fuzz.sh: $build_dir was not configured for the fuzzers; configuring it anew" >&2
  rm -rf "$build_dir/CMakeCache.txt" "$build_dir/CMakeFiles"
fi
if [[ ! -f $build_dir/CMakeCache.txt ]]; then
  # The library is built as the product is (-O2), with line tables for the reports; no MPI, CUDA or
  # verbs: nothing the harnesses reach needs them.
  CC=$clang_cc CXX=$clang_cxx RINGD_BUILD_DIR=$build_dir scripts/build.sh \
    -DRINGD_BUILD_FUZZERS=ON -DRINGD_BUILD_TESTS=OFF -DRINGD_BUILD_BENCH=OFF \
    -DRINGD_WITH_MPI=OFF -DRINGD_WITH_CUDA=OFF -DRINGD_WITH_IBVERBS=OFF \
    "-DRINGD_FUZZ_SECONDS=$seconds"
else
  RINGD_BUILD_DIR=$build_dir scripts/build.sh "-DRINGD_FUZZ_SECONDS=$seconds"
fi

if ((seeds)); then
  rm -rf tests/fuzz/corpus
  "$build_dir/tests/fuzz/make_seeds" tests/fuzz/corpus
  echo "fuzz.sh: wrote $(find tests/fuzz/corpus -type f | wc -l) seeds to tests/fuzz/corpus"
  exit 0
fi

filter=()
if ((${#names[@]})); then
  filter=(-R "^($(IFS='|'; echo "${names[*]/%/_fuzz}"))\$")
fi
status=0
ctest --test-dir "$build_dir" -L fuzz -j "$jobs" --output-on-failure "${filter[@]}" \
  2>&1 | tee "$build_dir/fuzz.log" || status=$?
echo "fuzz.sh: ${seconds} s per fuzzer:"
grep -ho '^fuzz: .*' "$build_dir/Testing/Temporary/LastTest.log" | sed 's/^/  /' || true
exit "$status"
