#!/usr/bin/env bash
# The README's demo command: installs what is missing (Fashion-MNIST comes from Debian's
# dataset-fashion-mnist package), builds, and trains a 784-256-10 MLP on Fashion-MNIST with 4 MPI
# processes on this machine: ring allreduce of the gradients over ringd's TCP transport (bootstrapped
# through MPI), progress lines while it trains, the test accuracy after every epoch, and at the end
# the final test accuracy and where the checkpoint is.
#
#   scripts/demo.sh [extra `ringd train` arguments, e.g. --epochs 2 or --mode ps]
#
#   RINGD_BUILD_DIR   build directory (default: build)
#   RINGD_DEMO_RANKS  number of ranks (default: 4; ranks may outnumber cores)
#   RINGD_DEMO_DIR    where the checkpoints and the JSON summary go (default: $RINGD_BUILD_DIR/demo;
#                     emptied first, so every demo starts at step 0)
#
# Measured on the 2-core development machine (shared with other jobs): 8 epochs in 33 s, final
# test accuracy 0.873 (docs/performance.md, "The demo (scripts/demo.sh)").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${RINGD_BUILD_DIR:-build}
ranks=${RINGD_DEMO_RANKS:-4}
demo_dir=${RINGD_DEMO_DIR:-$build_dir/demo}

scripts/install_deps.sh
# The same configuration as scripts/test.sh's main build (CPU only; the CUDA variant has its own
# directory, build-cuda), so the tests reuse this build instead of reconfiguring and rebuilding
# it (tests/scripts/build_once_test.py checks that the two agree).
RINGD_BUILD_DIR=$build_dir RINGD_BUILD_TARGETS=ringd scripts/build.sh -DRINGD_WITH_CUDA=OFF

ringd=$build_dir/bin/ringd
[[ -x $ringd ]] || { echo "demo: $ringd was not built" >&2; exit 1; }
if ! "$ringd" train --help >/dev/null 2>&1; then
  echo "demo: '$ringd train' is not available in this build (ringd --help lists the commands)" >&2
  exit 1
fi
rm -rf "$demo_dir"
mkdir -p "$demo_dir"

# Open MPI refuses to start as root unless told it may.
if ((EUID == 0)); then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# --oversubscribe: more ranks than cores is fine here. mpi_yield_when_idle: waiting ranks yield the
# CPU instead of spinning. btl self,tcp: MPI itself (the bootstrap) talks over TCP too.
# Per rank a batch of 64 (global 256) at lr 0.0125 x 4 ranks = 0.05, 100 warm-up steps.
set -x
exec mpirun -np "$ranks" --oversubscribe --mca mpi_yield_when_idle 1 --mca btl self,tcp \
  "$ringd" train --transport tcp --layers 784,256,10 --batch-size 64 --lr 0.0125 --epochs 8 \
  --log-every 117 --checkpoint-dir "$demo_dir/checkpoints" --checkpoint-every 468 \
  --json "$demo_dir/summary.json" "$@"
