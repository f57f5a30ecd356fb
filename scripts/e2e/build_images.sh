#!/usr/bin/env bash
# Builds ringd's images for real and runs them: the CPU image from the repository's Dockerfile
# (VARIANT=cpu FROM a Debian 12 base) and, with --pytorch / --tensorflow, examples/pytorch/'s and
# examples/tensorflow/'s Dockerfiles on top of it. Then `ringd --version` and the demo's 4-rank
# training (mpirun, TCP transport) inside a container; with --tensorflow also a 2-rank ringd.keras
# run of the Keras example as the image's user, with the ops built into the image (no compiler).
# Prints each image's size and build time. Part of scripts/e2e_k8s.sh; runs alone too.
#
#   scripts/e2e/build_images.sh [--pytorch] [--tensorflow] [--no-smoke]
#
# No registry can be reached here but Debian's mirror and PyPI, so the base image is made with
# mmdebstrap from the host's own apt sources (once: kept as $RINGD_E2E_CACHE/bookworm.tar) and
# imported into podman as localhost/debian:bookworm. Podman runs rootful with a containers.conf of
# this suite's own (CONTAINERS_CONF: runc, cgroupfs, the ulimits this VM allows), so the host's
# /etc/containers is left alone. Images stay in podman's store; cluster.sh copies them into dockerd.
set -euo pipefail
E2E_NAME=build_images
# shellcheck source=scripts/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pytorch=0 tensorflow=0 smoke=1
for arg in "$@"; do
  case $arg in
    --pytorch) pytorch=1 ;;
    --tensorflow) tensorflow=1 ;;
    --no-smoke) smoke=0 ;;
    -h | --help)
      sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
need_root
started_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)
need_packages podman mmdebstrap runc ca-certificates
use_podman_conf

base=localhost/debian:bookworm
if ! podman image exists "$base"; then
  tarball=$E2E_CACHE/bookworm.tar
  if [[ ! -s $tarball ]]; then
    sources=$(host_debian_sources)
    say "making the base image with mmdebstrap from $sources (once)"
    mkdir -p "$E2E_CACHE"
    t0=$SECONDS
    mmdebstrap --quiet --format=tar --variant=apt --include=ca-certificates bookworm "$tarball.part" "$sources" ||
      die "mmdebstrap failed"
    mv "$tarball.part" "$tarball"
    say "base tarball in $((SECONDS - t0)) s ($(du -h "$tarball" | cut -f1))"
  fi
  podman import --quiet "$tarball" "$base" >/dev/null || die "podman import $tarball failed"
fi

# pip inside a build trusts what the host's pip trusts: the host's CA bundle and a pip.conf naming
# it (and the host's index, if it sets one) are mounted into the RUN steps only, never into the
# image. Needed wherever PyPI is reached through a TLS-inspecting proxy, as here.
pip_mounts() {
  local bundle=/etc/ssl/certs/ca-certificates.crt index
  [[ -s $bundle ]] || return 0
  {
    echo "[global]"
    echo "cert = /run/ringd-e2e/ca.crt"
    index=$(python3 -m pip config get global.index-url 2>/dev/null || true)
    [[ -z $index ]] || echo "index-url = $index"
  } >"$E2E_CACHE/pip.conf"
  echo "--volume=$bundle:/run/ringd-e2e/ca.crt:ro"
  echo "--volume=$E2E_CACHE/pip.conf:/etc/pip.conf:ro"
}

report=()
# build TAG DOCKERFILE [--volume=...]... BUILD-ARG...
build() {
  local tag=$1 file=$2
  shift 2
  local args=() a t0=$SECONDS log=$E2E_CACHE/build-${tag//[\/:]/_}.log
  for a in "$@"; do
    if [[ $a == --volume=* ]]; then args+=("$a"); else args+=(--build-arg "$a"); fi
  done
  say "building $tag from $file"
  # --format docker: the OCI format has no SHELL, and podman would run every RUN with /bin/sh
  # instead of the Dockerfiles' bash -o pipefail (it warns, and builds on).
  # --network host: RUN steps reach the mirror through the host's network, and podman makes no
  # CNI bridge (cni-podman0) that would outlive the build.
  podman build --pull=never --layers --format docker --network host -f "$REPO_ROOT/$file" "${args[@]}" -t "$tag" "$REPO_ROOT" \
    >"$log" 2>&1 || die "podman build of $tag failed; the end of $log:
$(tail -n 30 "$log")"
  local size
  size=$(podman image inspect --format '{{.Size}}' "$tag")
  report+=("$(printf '%-34s %5d MB  built in %4d s' "$tag" $((size / 1000000)) $((SECONDS - t0)))")
}

build localhost/ringd:0.1.0-cpu Dockerfile VARIANT=cpu CPU_BASE=$base
if ((pytorch)); then
  mapfile -t mounts < <(pip_mounts)
  build localhost/ringd-pytorch:0.1.0 examples/pytorch/Dockerfile "${mounts[@]}" \
    RINGD_IMAGE=localhost/ringd:0.1.0-cpu CPU_BASE=$base TORCH_INDEX_URL=
fi
if ((tensorflow)); then
  mapfile -t mounts < <(pip_mounts)
  build localhost/ringd-tensorflow:0.1.0 examples/tensorflow/Dockerfile "${mounts[@]}" \
    RINGD_IMAGE=localhost/ringd:0.1.0-cpu CPU_BASE=$base
fi
# Each rebuild leaves the images it replaced untagged (the PyTorch one is 6 GB): they are
# removed, and only those older than this run (its wheel stages stay, as the next build's cache).
# Without this, a few runs filled this machine's disk (podman failed mid-commit).
podman image prune --force --filter "until=$started_at" >/dev/null ||
  say "podman image prune failed (the disk may fill with replaced images)"

if ((smoke)); then
  run=(podman run --rm --network none --entrypoint)
  version=$("${run[@]}" ringd localhost/ringd:0.1.0-cpu --version) || die "ringd --version failed in the image"
  report+=("ringd --version in the image: $(head -n1 <<<"$version"); $(grep '^Transports:' <<<"$version" | tr -s ' ')")
  say "the demo's training, 4 ranks in one container (2 epochs)"
  t0=$SECONDS
  out=$("${run[@]}" mpirun localhost/ringd:0.1.0-cpu -np 4 --oversubscribe \
    --mca mpi_yield_when_idle 1 --mca btl self,tcp --mca btl_tcp_if_include lo \
    --mca oob_tcp_if_include lo \
    ringd train --transport tcp --iface lo --layers 784,256,10 --batch-size 64 --lr 0.0125 \
    --epochs 2 --log-every 117 --checkpoint-dir /tmp/ck --checkpoint-every 468 2>&1) ||
    die "the demo's training failed in the image:
$(tail -n 20 <<<"$out")"
  accuracy=$(grep -o 'test accuracy: [0-9.]*' <<<"$out" | tail -n1)
  [[ -n $accuracy ]] || die "the demo's training printed no test accuracy:
$(tail -n 20 <<<"$out")"
  report+=("demo training in the image (4 ranks, 2 epochs): $accuracy in $((SECONDS - t0)) s")
  if ((pytorch)); then
    out=$("${run[@]}" python3 localhost/ringd-pytorch:0.1.0 -c \
      'import torch, ringd.torch as hvd; print("torch", torch.__version__, "ringd.torch", hvd.__name__)' 2>&1) ||
      die "import ringd.torch failed in the PyTorch image: $out"
    report+=("PyTorch image: $out")
  fi
  if ((tensorflow)); then
    t0=$SECONDS
    out=$("${run[@]}" mpirun localhost/ringd-tensorflow:0.1.0 -np 2 --oversubscribe \
      --mca mpi_yield_when_idle 1 --mca btl self,tcp --mca btl_tcp_if_include lo \
      --mca oob_tcp_if_include lo -x RINGD_TRANSPORT=tcp -x RINGD_IFACE=lo \
      python3 /opt/ringd/examples/tensorflow/keras_fashion_mnist.py --epochs 1 \
      --limit-train 4096 2>&1) || die "the Keras example failed in the TensorFlow image:
$(tail -n 20 <<<"$out")"
    accuracy=$(grep -o 'final test accuracy [0-9.]*' <<<"$out" | tail -n1)
    [[ -n $accuracy ]] || die "the Keras example printed no test accuracy:
$(tail -n 20 <<<"$out")"
    report+=("TensorFlow image, ringd.keras on 2 ranks (4096 images, 1 epoch): $accuracy in $((SECONDS - t0)) s")
  fi
fi
printf 'build_images: %s\n' "${report[@]}"
