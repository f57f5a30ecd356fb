# syntax=docker/dockerfile:1
# The ringd image: one `ringd agent` per Kubernetes pod (k8s/, docs/launcher.md).
#
#   docker build -t ringd:0.1.0 .
#   docker build --build-arg CUDA_VERSION=12.8.1 -t ringd:0.1.0-cuda12 .   # nodes with older drivers
#   docker build --build-arg VARIANT=cpu -t ringd:0.1.0-cpu .              # CPU only, no CUDA base
#   podman build --build-arg VARIANT=cpu --build-arg CPU_BASE=debian:bookworm -t ringd:0.1.0-cpu .
#
# Needs a builder that skips the stages the variant does not use (BuildKit, podman/buildah): the
# classic `docker build` of dockerd 20.10 would pull both variants' bases.
# Two stages, each on the variant's base: `build` compiles ringd (on NVIDIA's CUDA devel image, or
# CPU_BASE, plain Ubuntu by default, for VARIANT=cpu) with the same two scripts the README and CI use
# (scripts/install_deps.sh, scripts/build.sh); tests/k8s/dockerfile_test.py checks that it does,
# and with options the project defines. `runtime` starts from the matching CUDA runtime image
# (cudart, cuBLAS, NCCL), or the same Ubuntu for VARIANT=cpu, and adds only what ringd loads at run
# time, listed by scripts/runtime_packages.sh from the binary itself, plus Open MPI's programs
# (mpirun, orted). The cpu variant is a few hundred MB instead of several GB: the k8s cpu, cpu-job
# and ps overlays use it (tag 0.1.0-cpu).
#
# The cpu variant is built and run for real by scripts/e2e/build_images.sh (podman, FROM a Debian 12
# base made with mmdebstrap) and applied to a real cluster by scripts/e2e_k8s.sh; the cuda variant
# has not been built (NVIDIA's bases cannot be pulled here). hadolint lints both
# (scripts/validate_k8s.sh).

# CUDA 13.0 is what CI's CUDA build compiles with (scripts/test.sh); it needs an R580 or newer
# driver on the nodes. Both stages must use the same version.
ARG CUDA_VERSION=13.0.0
# cuda (default) or cpu: which base the stages below start from.
ARG VARIANT=cuda
# The cpu variant's base, for both stages: a Debian or Ubuntu release that has the packages
# scripts/install_deps.sh installs (the e2e suite builds it on Debian 12; the Ubuntu 22.04 default
# has not been built here).
ARG CPU_BASE=ubuntu:22.04

# ---- the variants' bases ----------------------------------------------------------------------
# IMAGE_WITH_CUDA: the build's -DRINGD_WITH_CUDA (ON, not AUTO, so that a missing CUDA fails the
# cuda build instead of silently producing an image without it).
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu22.04 AS build-cuda
ENV IMAGE_WITH_CUDA=ON
# hadolint ignore=DL3006
FROM ${CPU_BASE} AS build-cpu
ENV IMAGE_WITH_CUDA=OFF
FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu22.04 AS runtime-cuda
# hadolint ignore=DL3006
FROM ${CPU_BASE} AS runtime-cpu

# ---- build ------------------------------------------------------------------------------------
# hadolint ignore=DL3006
FROM build-${VARIANT} AS build

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src

# Dependencies first, in their own layer: it is rebuilt only when the package list changes.
# install_deps.sh runs apt-get non-interactively (DEBIAN_FRONTEND) and installs Open MPI, protobuf,
# CLI11, rdma-core and the rest; NCCL and cuBLAS come with the devel image.
COPY scripts/install_deps.sh scripts/install_deps.sh
RUN scripts/install_deps.sh

COPY . .
# The ringd binary only: no tests, no benchmarks. MPI and verbs are ON, not AUTO, so that a
# missing one fails the build instead of silently producing an image without it; CUDA is the
# variant's.
RUN RINGD_BUILD_DIR=build-image RINGD_BUILD_TARGETS=ringd scripts/build.sh \
      -DRINGD_WITH_CUDA="${IMAGE_WITH_CUDA}" -DRINGD_WITH_MPI=ON -DRINGD_WITH_IBVERBS=ON \
      -DRINGD_BUILD_TESTS=OFF -DRINGD_BUILD_BENCH=OFF \
      -DCMAKE_CUDA_ARCHITECTURES="80;90" \
 && scripts/runtime_packages.sh build-image/bin/ringd > build-image/runtime-packages.txt

# ---- runtime ----------------------------------------------------------------------------------
# hadolint ignore=DL3006
FROM runtime-${VARIANT} AS runtime

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# apt-get must never ask (a build has no terminal); ARG, not ENV, so it stays out of the image.
ARG DEBIAN_FRONTEND=noninteractive

# runtime-packages.txt pins NAME=VERSION of every library ringd links (same Ubuntu release as the
# build stage, so the same versions). Added by hand, because nothing links them: openmpi-bin
# (mpirun, orted), ibverbs-providers (the NIC drivers libibverbs loads, e.g. mlx5) and the
# Fashion-MNIST data set that `ringd train` reads by default.
COPY --from=build /src/build-image/runtime-packages.txt /tmp/runtime-packages.txt
# The three added by hand take the release's current version (DL3008 asks for pins; the libraries
# ringd links are pinned by the list).
# hadolint ignore=DL3008
RUN apt-get update \
 && xargs -a /tmp/runtime-packages.txt apt-get install -y --no-install-recommends \
 && apt-get install -y --no-install-recommends openmpi-bin ibverbs-providers dataset-fashion-mnist \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt

COPY --from=build /src/build-image/bin/ringd /usr/local/bin/ringd

# Non-root: Open MPI refuses root by default, and nothing here needs it. The uid is the one
# k8s/base/statefulset.yaml runs as (runAsUser: 10001). /var/lib/ringd is the job volume's mount
# point (hostfile, completion marker, metrics).
RUN groupadd --gid 10001 ringd \
 && useradd --uid 10001 --gid 10001 --create-home --shell /usr/sbin/nologin ringd \
 && install -d -o 10001 -g 10001 /var/lib/ringd
USER 10001:10001
WORKDIR /var/lib/ringd

EXPOSE 29400 29401
ENTRYPOINT ["ringd", "agent"]
