#!/usr/bin/env bash
# The README's demo command: installs what is missing, builds, and runs a 4-rank allreduce
# benchmark on this machine (4 MPI processes over TCP, results checked), printed in nccl-tests'
# format: size, count, type, redop, time, algbw, busbw, #wrong.
#
#   scripts/demo.sh [extra `ringd bench allreduce` arguments, e.g. -e 1M or -d half]
#
#   RINGD_BUILD_DIR   build directory (default: build)
#   RINGD_DEMO_RANKS  number of ranks (default: 4; ranks may outnumber cores)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${RINGD_BUILD_DIR:-build}
ranks=${RINGD_DEMO_RANKS:-4}

scripts/install_deps.sh
RINGD_BUILD_DIR=$build_dir RINGD_BUILD_TARGETS=ringd scripts/build.sh

ringd=$build_dir/src/launcher/ringd
[[ -x $ringd ]] || { echo "demo: $ringd was not built" >&2; exit 1; }
if ! "$ringd" bench --help >/dev/null 2>&1; then
  echo "demo: '$ringd bench' is not available in this build (ringd --help lists the commands)" >&2
  exit 1
fi

# --oversubscribe: more ranks than cores is fine here. mpi_yield_when_idle: waiting ranks yield the
# CPU instead of spinning, which otherwise makes small allreduces 100x slower when oversubscribed.
# btl self,tcp: ranks talk over TCP, as they would between nodes.
set -x
exec mpirun -np "$ranks" --oversubscribe --allow-run-as-root --mca mpi_yield_when_idle 1 \
  --mca btl self,tcp "$ringd" bench allreduce --check -b 4K -e 64M -f 4 "$@"
