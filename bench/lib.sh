# Shared parts of the bench/compare_*.sh scripts (sourced, not run): argument checks, packages,
# the emulated cluster's lifetime, run metadata, waiting for a quiet machine, the line measurement
# and the mpirun command line that reaches every namespace. The sourcing script sets
#   bench_name   prefix of its messages        nodes, rate   the cluster
#   out          results directory             wait_idle     0 or a percent (await_idle)
# before calling these.

bench_log() { echo "$bench_name: $*" >&2; }

check_number() { # name value min max
  if ! [[ $2 =~ ^[0-9]+$ ]] || (($2 < $3 || $2 > $4)); then
    echo "$bench_name: $1 must be a number in $3..$4, got '$2'" >&2
    exit 2
  fi
}

require_root() {
  if ((EUID != 0)); then
    echo "$bench_name: needs root (network namespaces, tc); run with sudo" >&2
    exit 1
  fi
}

ensure_packages() { # package...   (apt, only what is missing; a failure only skips what needs it)
  local missing=() package
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" ||
      missing+=("$package")
  done
  ((${#missing[@]} == 0)) && return 0
  bench_log "installing ${missing[*]}"
  local sudo=
  ((EUID == 0)) || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null ||
    { $sudo apt-get update -q >/dev/null &&
      $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; } ||
    bench_log "could not install ${missing[*]}; the parts needing them are skipped"
}

ensure_built() { # build_dir target...   (builds the missing ones with scripts/build.sh)
  local dir=$1 target missing=()
  shift
  for target in "$@"; do
    case $target in
      ringd) [[ -x $dir/bin/ringd ]] || missing+=("$target") ;;
      *) [[ -x $dir/bench/$target ]] || missing+=("$target") ;;
    esac
  done
  ((${#missing[@]} == 0)) && return 0
  bench_log "building ${missing[*]} in $dir"
  # A fresh build directory is configured without CUDA: the arena needs none of it.
  local cuda_off=()
  [[ -f $dir/CMakeCache.txt ]] || cuda_off=(-DRINGD_WITH_CUDA=OFF)
  RINGD_BUILD_DIR=$dir RINGD_BUILD_TARGETS="${missing[*]}" scripts/build.sh "${cuda_off[@]}" >&2
}

# Brings the cluster up and makes sure it goes down on every exit (and runs `bench_cleanup_extra`
# when the script defines it).
cluster_up() {
  mkdir -p "$out"
  trap cluster_cleanup EXIT
  trap 'exit 130' INT TERM
  bench/cluster.sh down "$nodes"
  # cluster_burst (a script's --burst), when set, is the tbf burst; exported to cluster.sh only,
  # so that the ranks (mpirun passes its environment on) never see it.
  RINGD_CLUSTER_TBF_BURST=${cluster_burst:-${RINGD_CLUSTER_TBF_BURST:-}} \
    bench/cluster.sh up "$nodes" "$rate"
}
cluster_cleanup() {
  local status=$?
  trap - EXIT INT TERM
  bench/cluster.sh down "$nodes" || true
  if declare -F bench_cleanup_extra >/dev/null; then bench_cleanup_extra || true; fi
  exit "$status"
}

in_node() { local node=$1; shift; bench/cluster.sh exec "$node" "$@"; }

write_hostfile() { # path slots   (one line per node)
  local i
  : >"$1"
  for ((i = 0; i < nodes; i++)); do echo "10.77.0.$((i + 1)) slots=$2" >>"$1"; done
}

# DIR/meta.json: the command, the machine, the commit, the load and every RINGD_* setting (what
# else ran matters: on a shared 2-core machine other work shows up as noise). Extra KEY=VALUE
# pairs are stored too (numbers as numbers).
write_meta() { # command_line key=value...
  python3 - "$out/meta.json" "$@" <<'EOF'
import json, os, subprocess, sys, time
path, command, *pairs = sys.argv[1:]
meta = {"command": command}
for pair in pairs:
    key, value = pair.split("=", 1)
    meta[key] = int(value) if value.isdigit() else value
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip()
# A build of a tree with changes to tracked files is not that commit's: say so.
changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                         capture_output=True, text=True).stdout.strip()
if commit and changed:
    commit += " with uncommitted changes"
meta.update({"cpus": os.cpu_count(), "commit": commit, "nice": os.nice(0),
             "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "loadavg_start": " ".join(open("/proc/loadavg").read().split()[:3]),
             # The host's default TCP congestion control (the cluster's nodes inherit it unless
             # RINGD_CLUSTER_CONGESTION says otherwise): the peers' sockets use it.
             "host_tcp_congestion": open("/proc/sys/net/ipv4/tcp_congestion_control").read().strip(),
             "ringd_env": {k: v for k, v in os.environ.items()
                           if k.startswith("RINGD_") and "SECRET" not in k}})
json.dump(meta, open(path, "w"))
EOF
}
finish_meta() {
  python3 - "$out/meta.json" <<'EOF'
import json, sys
meta = json.load(open(sys.argv[1]))
meta["loadavg_end"] = " ".join(open("/proc/loadavg").read().split()[:3])
json.dump(meta, open(sys.argv[1], "w"))
EOF
}

# Percent of CPU time idle over the next second (all CPUs, from /proc/stat).
idle_percent() {
  local a b
  a=$(awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat)
  sleep 1
  b=$(awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN {split(a, x, " "); split(b, y, " ");
    printf "%d\n", (y[2] > x[2]) ? 100 * (y[1] - x[1]) / (y[2] - x[2]) : 100}'
}
await_idle() { # label   (with wait_idle > 0: up to 5 min until the CPUs are that idle)
  ((wait_idle > 0)) || return 0
  local deadline=$((SECONDS + 300)) idle
  while idle=$(idle_percent) && ((idle < wait_idle)); do
    if ((SECONDS >= deadline)); then
      bench_log "$1: CPUs only $idle% idle after 5 min of waiting; measuring anyway"
      echo "$1 idle=$idle% (gave up waiting)" >>"$out/idle.log"
      return 0
    fi
    sleep 5
  done
  echo "$1 idle=$idle%" >>"$out/idle.log"
}

iperf_gbps() { # iperf3 -J output on stdin -> receiver GB/s
  python3 -c 'import json,sys; print("%.4f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 8e9))'
}
# One TCP stream node0 -> node1 for 5 s into $out/line.json; sets line_gbps.
measure_line() {
  await_idle line
  bench_log "line: one TCP stream node0 -> node1 (iperf3, 5 s)"
  in_node 1 iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  in_node 0 iperf3 -c 10.77.0.2 -p 5201 -t 5 -J >"$out/line.json"
  wait "$server" || true
  line_gbps=$(iperf_gbps <"$out/line.json")
  bench_log "line: $line_gbps GB/s"
}

# mpirun_common: mpirun's flags for jobs started in node 0's namespace (bench/netns_rsh.sh starts
# the other daemons in theirs), and the ringd ranks' environment: a fresh job secret, eth0, and
# every RINGD_* variable the caller set (so tuning experiments are RINGD_X=... bench/compare_...).
set_mpirun_common() {
  # (btl "tcp,self" is one Open MPI value; shellcheck mistakes the comma for an array separator.)
  # shellcheck disable=SC2054
  mpirun_common=(--allow-run-as-root --oversubscribe --bind-to none
    --mca plm_rsh_agent "$repo/bench/netns_rsh.sh" --mca btl tcp,self
    --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 --mca mpi_yield_when_idle 1)
  ringd_env=(-x RINGD_IFACE=eth0 -x "RINGD_JOB_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')")
  local name
  while IFS='=' read -r name _; do
    # The cluster's own settings (bench/cluster.sh: RINGD_CLUSTER_*) are not the ranks'.
    [[ $name == RINGD_IFACE || $name == RINGD_JOB_SECRET || $name == RINGD_CLUSTER_* ]] ||
      ringd_env+=(-x "$name")
  done < <(env | grep '^RINGD_[A-Z_]*=' || true)
}

# record_run PART FRAMEWORK RATE ROUND JSON: the example's --json, tagged, as one line of
# $out/runs.jsonl (compare_pytorch.sh, compare_tensorflow.sh).
record_run() {
  "$python" - "$@" >>"$out/runs.jsonl" <<'PY'
import json, sys
part, framework, rate, round_, path = sys.argv[1:]
run = json.load(open(path))
run.update({"part": part, "framework": framework, "rate": rate, "round": int(round_)})
print(json.dumps(run))
PY
}

# scripts/python_env.sh's interpreter (torch, numpy), with ringd's Python package built in
# $build_dir/python when it is not there yet. Sets python.
ensure_python_package() {
  python=$(scripts/python_env.sh)
  if ! compgen -G "$build_dir/python/ringd/_core*.so" >/dev/null; then
    bench_log "building ringd's Python package in $build_dir"
    RINGD_BUILD_DIR=$build_dir RINGD_BUILD_TARGETS="ringd_python" scripts/build.sh \
      -DRINGD_BUILD_PYTHON=ON "-DPython_EXECUTABLE=$python" >&2
  fi
}

# The first python3 that has matplotlib (apt's python3-matplotlib serves /usr/bin/python3, which a
# pyenv or venv python3 on PATH does not see); pip as the last resort. Sets plot_python.
find_plot_python() {
  local candidate
  for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c 'import matplotlib' 2>/dev/null; then
      plot_python=$candidate
      return 0
    fi
  done
  python3 -m pip install -q matplotlib >&2 || bench_log "pip install matplotlib failed: no PNG"
  plot_python=python3
}
