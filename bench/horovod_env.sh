#!/usr/bin/env bash
# The Horovod peer for bench/compare_pytorch.sh: torch 2.0.1 + horovod 0.28.1 from PyPI (the
# sdist, built here: CPU-only, MPI and Gloo ops) in their own virtual environment, created once
# and reused. Prints the environment's python on stdout. With --tensorflow, the peer for
# bench/compare_tensorflow.sh: tensorflow-cpu 2.15.1 + horovod 0.28.1's TensorFlow binding, in
# build-tools/horovod-tf-venv (or RINGD_HOROVOD_VENV). 2.15.1 is the newest TensorFlow it builds
# against here: against 2.21.0 the build stops in horovod/tensorflow/xla_mpi_ops.cc (compiled for
# every TensorFlow >= 2.6, CPU builds too): TensorFlow's headers include highwayhash and farmhash
# headers the wheel does not ship, and past those, TensorFlow 2.21 has no
# tensorflow/compiler/xla/client/xla_builder.h any more (it moved to xla/hlo/builder/), so only a
# patched Horovod would build (measured 2026-11-29: 2.21.0 fails after 568 s, 2.15.1 builds in
# 339 s with -j1).
#
#   bench/horovod_env.sh [--tensorflow]     RINGD_HOROVOD_VENV=build-tools/horovod[-tf]-venv
#
# What it takes here (measured on the 2-core machine: about 6 minutes of compiling):
#  * the CUDA toolkit hidden from the build: /usr/local/cuda and CUDA_HOME make Horovod's CMake
#    attempt a CUDA build (against CUDA 13, which fails); the build runs inside `unshare -m` with a
#    tmpfs over /usr/local and CUDA_HOME unset;
#  * MAKEFLAGS=-j2 (its setup.py compiles with -j8 otherwise);
#  * HOROVOD_CMAKE=/usr/bin/cmake: the cmake 4 some wheels install rejects Gloo's old
#    cmake_minimum_required.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { echo "horovod_env: $*" >&2; }
if [[ ${1:-} == --tensorflow ]]; then
  venv=${RINGD_HOROVOD_VENV:-$repo/build-tools/horovod-tf-venv}
  stamp="tensorflow-cpu==2.15.1 horovod==0.28.1"
  framework=(tensorflow-cpu==2.15.1)
  with=(HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1)
  module=horovod.tensorflow.keras
else
  venv=${RINGD_HOROVOD_VENV:-$repo/build-tools/horovod-venv}
  stamp="torch==2.0.1 horovod==0.28.1"
  framework=(torch==2.0.1 numpy==1.26.4)
  with=(HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1)
  module=horovod.torch
fi
[[ $venv == /* ]] || venv=$repo/$venv

if [[ -f $venv/stamp && $(cat "$venv/stamp") == "$stamp" ]]; then
  echo "$venv/bin/python"
  exit 0
fi
((EUID == 0)) || { say "ERROR: run as root (unshare -m hides /usr/local/cuda from the build)"; exit 2; }
mkdir -p "$(dirname "$venv")"
rm -rf "$venv"
log=$venv.log
say "building $stamp into $venv (once; about 6 minutes on 2 cores; log: $log)"
python3 -m venv "$venv" >"$log" 2>&1
"$venv/bin/pip" install --quiet --disable-pip-version-check "${framework[@]}" \
  cloudpickle psutil pyyaml packaging cffi wheel >>"$log" 2>&1 ||
  { say "ERROR: pip could not install ${framework[*]}; see $log"; exit 2; }
# /usr/local hidden by a tmpfs in a private mount namespace; the pip inside it is the venv's
# (under $repo, not /usr/local).
# shellcheck disable=SC2016  # expanded by the inner bash
if ! unshare -m bash -c '
    mount -t tmpfs none /usr/local
    unset CUDA_HOME CUDA_PATH
    export MAKEFLAGS=-j2 HOROVOD_CMAKE=/usr/bin/cmake HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
      HOROVOD_WITHOUT_MXNET=1 "${@:2}"
    unset HOROVOD_GPU_OPERATIONS
    "$1/bin/pip" install --no-cache-dir --no-build-isolation --disable-pip-version-check \
      horovod==0.28.1' _ "$venv" "${with[@]}" >>"$log" 2>&1; then
  say "ERROR: horovod 0.28.1 did not build; see $log: $(tail -n 5 "$log")"
  exit 2
fi
"$venv/bin/python" -c "import $module" >>"$log" 2>&1 ||
  { say "ERROR: $module does not import; see $log"; exit 2; }
echo "$stamp" >"$venv/stamp"
echo "$venv/bin/python"
