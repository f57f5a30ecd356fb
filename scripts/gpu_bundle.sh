#!/usr/bin/env bash
# The GPU check (scripts/gpu_check.sh) on a GPU machine that can neither build nor install:
# no network, no apt, no compilers for ringd's dependencies. Build and pack here, run there.
#
#   scripts/gpu_bundle.sh pack [BUNDLE]   after `scripts/gpu_check.sh --build-only`: packs the
#                                         CUDA build's ringd and device tests (stripped), a ctest
#                                         file for them, its config.h and CMakeCache.txt, every
#                                         shared library they load except CUDA's, NCCL's and the
#                                         C/C++ runtime's, and the Fashion-MNIST files, into
#                                         BUNDLE (default gpu-bundle.tar.xz; about 40 MB)
#   scripts/gpu_bundle.sh run BUNDLE      on the GPU machine, from a checkout of the same commit:
#                                         unpacks into a fresh temporary directory, finds
#                                         libcudart.so.13, libcublas(Lt).so.13 and libnccl.so.2
#                                         there (CUDA's directories, then the whole disk), and runs
#                                         `scripts/gpu_check.sh --skip-build` on the unpacked build;
#                                         its exit status is gpu_check's
#
#   RINGD_CUDA_BUILD_DIR=build-cuda                    the build to pack
#   RINGD_GPU_BUNDLE_DATA=/usr/share/datasets/fashion-mnist   the dataset to pack
#   RINGD_GPU_REPORT, RINGD_GPU_CHECK_*                passed on to gpu_check.sh (the report goes
#                                                      into the temporary directory unless
#                                                      RINGD_GPU_REPORT says elsewhere)
#
# The machine needs the NVIDIA driver, CUDA 13's runtime and cuBLAS, NCCL 2, ctest and python3;
# the packed libraries are Debian 12's (glibc 2.36), so its glibc must be that or newer.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }
say() { echo "gpu_bundle: $*" >&2; }
die() { say "$*"; exit 2; }

device_tests() {
  local source
  for source in tests/device/*_test.cc; do
    [[ -e $source ]] && basename "$source" .cc
  done
}

# checkout_state: the commit, "-modified" when tracked files differ from it
checkout_state() {
  local commit
  commit=$(git rev-parse --short=12 HEAD 2>/dev/null) || { echo unknown; return; }
  git diff --quiet HEAD -- 2>/dev/null || commit+=-modified
  echo "$commit"
}

pack() {
  local bundle=${1:-gpu-bundle.tar.xz}
  local build=${RINGD_CUDA_BUILD_DIR:-build-cuda}
  local data=${RINGD_GPU_BUNDLE_DATA:-/usr/share/datasets/fashion-mnist}
  [[ -x $build/bin/ringd ]] ||
    die "no $build/bin/ringd: build the CUDA variant first (scripts/gpu_check.sh --build-only)"
  grep -q 'define RINGD_HAVE_CUDA 1' "$build/generated/ringd/config.h" 2>/dev/null ||
    die "$build is not a CUDA build ($build/generated/ringd/config.h lacks RINGD_HAVE_CUDA 1)"
  [[ -f $data/train-images-idx3-ubyte.gz ]] ||
    die "no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist, or RINGD_GPU_BUNDLE_DATA)"
  local stage
  stage=$(mktemp -d)
  # shellcheck disable=SC2064  # expands now, on purpose
  trap "rm -rf '$stage'" EXIT
  local b=$stage/build-cuda
  mkdir -p "$b/bin" "$b/tests" "$b/generated/ringd" "$stage/lib" "$stage/data"
  strip -o "$b/bin/ringd" "$build/bin/ringd"
  local t binaries=("$b/bin/ringd")
  : >"$b/CTestTestfile.cmake.in"
  for t in $(device_tests); do
    [[ -x $build/tests/$t ]] || die "no $build/tests/$t: build the device tests too"
    strip -o "$b/tests/$t" "$build/tests/$t"
    binaries+=("$b/tests/$t")
    printf 'add_test([=[%s]=] "@BUILD@/tests/%s" "--gtest_brief=1")\n' "$t" "$t"
    printf 'set_tests_properties([=[%s]=] PROPERTIES TIMEOUT "600")\n' "$t"
  done >>"$b/CTestTestfile.cmake.in"
  cp "$build/generated/ringd/config.h" "$b/generated/ringd/"
  cp "$build/CMakeCache.txt" "$b/"
  cp "$data"/*-ubyte.gz "$stage/data/"
  # What the GPU machine brings itself: the driver, CUDA, NCCL, the C and C++ runtime.
  local name path missing linked
  linked=$(for t in "${binaries[@]}"; do ldd "$t"; done)
  missing=$(awk '/not found/ { print $1 }' <<<"$linked" | sort -u)
  [[ -z $missing ]] || die "libraries not found here: $missing"
  while read -r name path; do
    cp -L "$path" "$stage/lib/$name"
  done < <(awk '$3 ~ /^\// { print $1, $3 }' <<<"$linked" | sort -u | grep -vE '^(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^ ]*|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.')
  checkout_state >"$stage/commit"
  tar -C "$stage" -cJf "$bundle" build-cuda lib data commit
  say "packed $bundle ($(du -h "$bundle" | cut -f1); $(find "$stage/lib" -type f | wc -l) libraries," \
    "commit $(cat "$stage/commit"))"
}

# find_library NAME: the first file called NAME in CUDA's usual directories, else anywhere on
# the root filesystem
find_library() {
  local found
  found=$(find /usr/local/cuda/lib64 /usr/local/cuda/targets /usr/local/cuda/lib \
    /usr/lib/x86_64-linux-gnu -name "$1" 2>/dev/null | head -n 1)
  [[ -n $found ]] || found=$(find / -xdev \( -path /proc -o -path /sys \) -prune -o \
    -name "$1" -print 2>/dev/null | head -n 1)
  echo "$found"
}

run() {
  local bundle=${1:-}
  [[ -f $bundle ]] || die "run: no bundle '$bundle' (see --help)"
  local unpacked
  unpacked=$(mktemp -d "${TMPDIR:-/tmp}/ringd-gpu-bundle.XXXXXX")
  tar -C "$unpacked" -xJf "$bundle"
  local b=$unpacked/build-cuda
  sed "s#@BUILD@#$b#g" "$b/CTestTestfile.cmake.in" >"$b/CTestTestfile.cmake"
  local packed head
  packed=$(cat "$unpacked/commit")
  head=$(checkout_state)
  [[ $packed == "$head" ]] ||
    say "warning: the bundle was packed at $packed, this checkout is at $head"
  local name found dirs=""
  for name in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
    found=$(find_library "$name")
    if [[ -z $found ]]; then
      say "$name not found on this machine: the CUDA build's ringd will not start"
    else
      say "$name: $found"
      dirs+="$(dirname "$found"):"
    fi
  done
  export LD_LIBRARY_PATH="$dirs$unpacked/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  say "unpacked into $unpacked; running scripts/gpu_check.sh --skip-build"
  local rc=0
  RINGD_CUDA_BUILD_DIR=$b RINGD_GPU_CHECK_DATA=$unpacked/data RINGD_GPU_CHECK_COMMIT=$packed \
    scripts/gpu_check.sh --skip-build || rc=$?
  return "$rc"
}

case ${1:-} in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  -h | --help) usage ;;
  *) usage >&2; exit 2 ;;
esac
