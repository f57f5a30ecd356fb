# shellcheck shell=bash disable=SC2034  # the variables are for the scripts that source this
# Shared by scripts/e2e/*.sh: where the real-cluster suite keeps what it builds and runs, and small
# helpers. Sourced, never run.
#
# RINGD_E2E_CACHE (default /var/cache/ringd-e2e): what is built once and kept between runs, outside
#   the tree: the Kubernetes binaries, Go's build cache, the Debian base image's tarball.
# RINGD_E2E_STATE (default /var/lib/ringd-e2e): a running cluster's files (etcd's data, certificates,
#   the kubelet's root, the persistent volumes, logs); `cluster.sh down` removes it.

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$E2E_DIR/../.." && pwd)
E2E_CACHE=${RINGD_E2E_CACHE:-/var/cache/ringd-e2e}
E2E_STATE=${RINGD_E2E_STATE:-/var/lib/ringd-e2e}
# The Kubernetes release Debian 12 packages as source (kubernetes 1.20.5+really1.20.2).
K8S_BIN=$E2E_CACHE/kubernetes/bin
# Debian's docker.io, not a newer client that may be first on PATH.
DOCKER=${RINGD_E2E_DOCKER:-/usr/bin/docker}

say() { echo "${E2E_NAME:-e2e}: $*" >&2; }
die() {
  say "ERROR: $*"
  exit 1
}
need_root() { ((EUID == 0)) || die "run as root (it starts daemons, mounts and changes sysctls)"; }
# Installs Debian packages that are missing (scripts/install_deps.sh with a list of its own).
need_packages() { "$REPO_ROOT/scripts/install_deps.sh" "$@"; }

# Podman, rootful, with this suite's own containers.conf (the host's /etc/containers untouched):
# runc (crun refuses this VM's hybrid cgroups), cgroupfs and a file event log (no systemd), and
# ulimits the VM allows (it refuses raising RLIMIT_NOFILE past 20000).
use_podman_conf() {
  mkdir -p "$E2E_CACHE"
  export CONTAINERS_CONF=$E2E_CACHE/containers.conf
  cat >"$CONTAINERS_CONF" <<'CONF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
}

# The host's Debian apt sources (a deb822 file or sources.list), for mmdebstrap and deb-src: the
# same mirror the host uses, whatever it is.
host_debian_sources() {
  local f
  for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
    if [[ -s $f ]] && grep -qv '^\s*#' "$f"; then
      echo "$f"
      return
    fi
  done
  die "no Debian apt sources found (/etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list)"
}
