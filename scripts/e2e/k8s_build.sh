#!/usr/bin/env bash
# Builds the Kubernetes control plane and kubelet that scripts/e2e/cluster.sh runs, once, from
# Debian 12's `kubernetes` source package (1.20.2: Debian packages no server binaries, and nothing
# else can be downloaded here). Kept in $RINGD_E2E_CACHE/kubernetes/bin; a second run with the four
# binaries and pause present returns at once. Took 528-674 s on 2 cores the first time (Go's build
# cache is kept too, so an interrupted build resumes).
#
#   scripts/e2e/k8s_build.sh      # kube-apiserver kube-controller-manager kube-scheduler kubelet
set -euo pipefail
E2E_NAME=k8s_build
# shellcheck source=scripts/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

binaries=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
missing=()
for b in "${binaries[@]}"; do [[ -x $K8S_BIN/$b ]] || missing+=("$b"); done
if ((${#missing[@]} == 0)) && [[ -x $K8S_BIN/pause ]]; then
  say "cached: ${binaries[*]} in $K8S_BIN ($("$K8S_BIN/kubelet" --version 2>&1))"
  exit 0
fi
need_root

# The source needs deb-src entries: the host's own Debian sources with deb-src for deb, in a file
# of this suite's own (the same mirror the host uses, whatever it is).
if ! apt-cache showsrc kubernetes 2>/dev/null | grep -q '^Package: kubernetes'; then
  sources=$(host_debian_sources)
  case $sources in
    *.sources) src_list=/etc/apt/sources.list.d/ringd-e2e-src.sources
      sed -E 's/^Types:.*/Types: deb-src/' "$sources" >"$src_list" ;;
    *) src_list=/etc/apt/sources.list.d/ringd-e2e-src.list
      sed -nE 's/^deb (.*)/deb-src \1/p' "$sources" >"$src_list" ;;
  esac
  apt-get update -q -o DPkg::Lock::Timeout=300 >/dev/null
  apt-cache showsrc kubernetes 2>/dev/null | grep -q '^Package: kubernetes' ||
    die "Debian's kubernetes source package is not in the host's apt sources ($sources -> $src_list)"
fi
# golang-go: Debian 12's Go 1.19; rsync and jq: the source's build scripts; dpkg-dev: apt-get source.
need_packages golang-go rsync jq dpkg-dev build-essential

src_root=$E2E_CACHE/kubernetes/src
mkdir -p "$src_root" "$K8S_BIN"
tree=$(find "$src_root" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
if [[ -z $tree ]]; then
  say "fetching Debian's kubernetes source package"
  (cd "$src_root" && apt-get source -q kubernetes >/dev/null 2>"$src_root/apt-source.log") ||
    die "apt-get source kubernetes failed (see $src_root/apt-source.log)"
  tree=$(find "$src_root" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
fi
[[ -n $tree ]] || die "no kubernetes-* tree under $src_root"

# Debian's Go 1.19 builds the vendored tree in GOPATH mode; the hack/ scripts set GOPATH up under
# _output. Go's build cache lives in the cache folder so that a second build starts warm.
export GO111MODULE=off GOFLAGS='' GOCACHE=$E2E_CACHE/gocache KUBE_BUILD_PLATFORMS=linux/amd64
export KUBE_GIT_VERSION=v1.20.2 KUBE_GIT_TREE_STATE=clean
cd "$tree"
start=$SECONDS
if [[ ! -f .ringd-generated ]]; then
  say "make generated_files (first time only)"
  make generated_files >"$src_root/generated.log" 2>&1 ||
    die "make generated_files failed (tail of $src_root/generated.log:
$(tail -n 20 "$src_root/generated.log"))"
  touch .ringd-generated
fi
for b in "${missing[@]}"; do
  say "building $b"
  make WHAT="cmd/$b" >"$src_root/build-$b.log" 2>&1 ||
    die "building $b failed (tail of $src_root/build-$b.log:
$(tail -n 20 "$src_root/build-$b.log"))"
  install -m 0755 "_output/local/go/bin/$b" "$K8S_BIN/$b"
  say "built $b ($((SECONDS - start)) s so far)"
done
# The pause container every pod's sandbox runs (the kubelet's --pod-infra-container-image): the
# source's own build/pause/linux/pause.c, linked statically. cluster.sh wraps it in an image.
if [[ ! -x $K8S_BIN/pause ]]; then
  gcc -Os -static -o "$K8S_BIN/pause" build/pause/linux/pause.c -DVERSION=v1.20.2-ringd-e2e
fi
say "done in $((SECONDS - start)) s: ${binaries[*]} in $K8S_BIN"
