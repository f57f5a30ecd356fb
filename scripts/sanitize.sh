#!/usr/bin/env bash
# The test suite under the sanitizers (opt-in: slower than the default suite, and a build of its
# own). Ends with the tests' summary; exits non-zero when any test failed or a sanitizer reported.
#
#   scripts/sanitize.sh asan [CTEST ARGS...]   AddressSanitizer + UndefinedBehaviorSanitizer (gcc),
#                                              the whole C++ suite and the integration tests
#                                              (build-asan; the Python package is left out: its
#                                              interpreter is not instrumented)
#   scripts/sanitize.sh tsan [CTEST ARGS...]   ThreadSanitizer (gcc) on the engine, transport,
#                                              rendezvous and fault tests: every test of the
#                                              fusion, transport and rendezvous areas, the tcp fault
#                                              and deadlock tests (build-tsan)
#
#   RINGD_SANITIZE_BUILD_DIR   the build directory (default build-asan / build-tsan)
#   RINGD_TEST_JOBS=2          tests at once
#
# Any report fails its test: ASan and UBSan abort (halt_on_error, -fno-sanitize-recover), TSan
# exits 66. Open MPI's and hwloc's own allocations that live until exit are not ringd's leaks:
# scripts/sanitizer_suppressions/lsan.txt names those libraries.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

kind=${1:-}
shift || true
case $kind in
  asan)
    # GCC 12's flow analysis under ASan warns falsely inside libstdc++'s <regex>: not an error here.
    flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -Wno-maybe-uninitialized"
    targets=""  # everything
    # package_find_package builds an uninstrumented program against the instrumented libringd.so,
    # which ASan refuses to load ("ASan runtime does not come first").
    tests=(-E '^(python_tests|format_check|build_once_test|package_find_package)$')
    ;;
  tsan)
    flags="-fsanitize=thread -fno-omit-frame-pointer"
    mapfile -t sources < <(ls tests/fusion/*_test.cc tests/transport/*_test.cc tests/rendezvous/*_test.cc)
    names=()
    for source in "${sources[@]}"; do names+=("$(basename "$source" .cc)"); done
    targets="ringd ${names[*]}"
    tests=(-R "^($(IFS='|'; echo "${names[*]}")|tcp_pair_test_nospin|tcp_fault_test_nospin)\$")
    ;;
  *)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac

build_dir=${RINGD_SANITIZE_BUILD_DIR:-build-$kind}
scripts/install_deps.sh
[[ $EUID == 0 ]] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# -O1: the sanitizers' usual level (reports keep their lines, runs stay fast enough).
RINGD_BUILD_DIR=$build_dir RINGD_BUILD_TARGETS=$targets scripts/build.sh \
  -DRINGD_WITH_CUDA=OFF -DRINGD_BUILD_BENCH=OFF -DRINGD_BUILD_PYTHON=OFF \
  "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_C_FLAGS=$flags" \
  "-DCMAKE_EXE_LINKER_FLAGS=${flags%% *}" "-DCMAKE_SHARED_LINKER_FLAGS=${flags%% *}"

suppressions=$PWD/scripts/sanitizer_suppressions
# Open MPI unloads its components at MPI_Finalize, after which their allocations have no module
# name to suppress by: keep them loaded.
export OMPI_MCA_mca_base_component_disable_dlclose=1
# Full stacks for every allocation (the libraries have no frame pointers), so that suppressions
# find the library frames below the allocator.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0:fast_unwind_on_malloc=0:malloc_context_size=30"
export LSAN_OPTIONS="suppressions=$suppressions/lsan.txt:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=0:exitcode=66:second_deadlock_stack=1:suppressions=$suppressions/tsan.txt"
status=0
ctest --test-dir "$build_dir" --output-on-failure -j "${RINGD_TEST_JOBS:-2}" "${tests[@]}" "$@" \
  2>&1 | tee "$build_dir/ctest.log" || status=$?
reports=$(grep -c -E '^(==[0-9]+==ERROR|SUMMARY: (AddressSanitizer|UndefinedBehaviorSanitizer|ThreadSanitizer|LeakSanitizer))|runtime error:' \
  "$build_dir/Testing/Temporary/LastTest.log" || true)
echo "sanitize.sh $kind: $(grep -E 'tests passed' "$build_dir/ctest.log" | tail -n 1); sanitizer reports in the tests' output: $reports"
((status == 0 && reports == 0))
