#!/usr/bin/env bash
# Installs the Debian packages ringd needs to build, test and run its demo. Idempotent: packages
# already installed are left alone, and when nothing is missing it touches neither the network nor
# the package index (a second run takes well under a second).
#
# Runs as root, or through `sudo` when that is available without a password prompt. CUDA, NCCL and
# cuBLAS are not installed here: the CUDA build is used when /usr/local/cuda (or nvcc on PATH) is
# already present, and skipped otherwise.
#
#   scripts/install_deps.sh              ringd's build, test and demo packages
#   scripts/install_deps.sh PKG [PKG..]  these packages instead (the opt-in suites' tools, e.g.
#                                        scripts/e2e/: podman, docker.io, etcd-server)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libopenmpi-dev openmpi-bin
  libprotobuf-dev protobuf-compiler
  libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  libopenblas-dev zlib1g-dev dataset-fashion-mnist
  libibverbs-dev rdma-core
  python3 python3-dev python3-numpy python3-venv
  iproute2 procps jq
  git clang-format
)
(($# == 0)) || packages=("$@")

say() { echo "install_deps: $*" >&2; }
die() {
  say "ERROR: $*"
  exit 1
}

command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this script supports Debian/Ubuntu (apt) only; install by hand: ${packages[*]}"

# Prints the packages among "$@" that are not fully installed (one dpkg-query call for all).
not_installed() {
  local installed
  installed=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "$@" 2>/dev/null |
    awk '$1 == "ii" { print $2 }' || true)
  local package
  for package in "$@"; do
    grep -qxF "$package" <<<"$installed" || echo "$package"
  done
}

mapfile -t missing < <(not_installed "${packages[@]}")

if ((${#missing[@]} == 0)); then
  say "all ${#packages[@]} packages present"
  exit 0
fi

if ((EUID == 0)); then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  die "missing packages: ${missing[*]}
  not root and no password-less sudo; as root run:
    apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
fi

export DEBIAN_FRONTEND=noninteractive
apt_options=(-y -q --no-install-recommends -o DPkg::Lock::Timeout=300)
say "installing ${#missing[@]} missing packages: ${missing[*]}"
"${as_root[@]}" apt-get update -q -o DPkg::Lock::Timeout=300 >/dev/null ||
  die "apt-get update failed (network or apt sources?); missing: ${missing[*]}"
"${as_root[@]}" apt-get install "${apt_options[@]}" "${missing[@]}" >/dev/null ||
  die "apt-get install failed for: ${missing[*]} (rerun it by hand to see apt's full output)"

mapfile -t still_missing < <(not_installed "${missing[@]}")
((${#still_missing[@]} == 0)) || die "apt-get reported success but these are not installed: ${still_missing[*]}"
say "installed: ${missing[*]}"
