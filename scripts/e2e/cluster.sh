#!/usr/bin/env bash
# A real single-node Kubernetes on this machine, for scripts/e2e_k8s.sh (test infrastructure, not
# part of ringd):
#
#   scripts/e2e/cluster.sh up       start it (builds Kubernetes once: scripts/e2e/k8s_build.sh)
#   scripts/e2e/cluster.sh down     stop everything it started, restore what it changed
#   scripts/e2e/cluster.sh status   what runs
#   scripts/e2e/cluster.sh env      the KUBECONFIG and kubectl to use (eval it)
#
# What runs (each a daemon with a pid file and a log in $RINGD_E2E_STATE):
#   etcd (Debian's etcd-server), kube-apiserver, kube-controller-manager, kube-scheduler and the
#   kubelet (v1.20.2 built from Debian's source), dockerd (Debian's docker.io: the kubelet's
#   dockershim runtime) on a bridge of its own, ringd-e2e0 (10.213.0.1/24), and the cluster DNS:
#   Debian's dnsmasq on 10.213.0.1:53 serving the headless Services' pod names, fed from the API's
#   Endpoints by dns_feeder.sh (CoreDNS is not packaged; kube-proxy is not needed: ringd's pods
#   reach each other by pod IP). Pods get their own network namespace with eth0 on the bridge.
# What it changes on the host, and `down` restores: the sysctls the kubelet and dockerd set
# (saved at `up`), the bridge (deleted), the kubelet's mounts (unmounted), every container.
# dockerd's images are kept in $RINGD_E2E_CACHE/docker so that a second run starts warm.
set -euo pipefail
E2E_NAME=cluster
# shellcheck source=scripts/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BRIDGE=ringd-e2e0
BRIDGE_IP=10.213.0.1
BRIDGE_CIDR=10.213.0.1/24
SERVICE_RANGE=10.214.0.0/24
ETCD_PORT=23379
API_PORT=16443
DOMAIN=cluster.local
NODE=ringd-e2e-node
PAUSE_IMAGE=ringd-e2e/pause:v1.20.2
DOCKER_SOCK=$E2E_STATE/docker.sock
KUBECONFIG_FILE=$E2E_STATE/admin.kubeconfig
KUBECTL=$REPO_ROOT/build-tools/k8s-venv/bin/kubectl
# Sysctls the kubelet (kernel defaults it wants) and dockerd may change: saved at up, put back at down.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)
# Stopped in this order at down (the reverse of up).
DAEMONS=(dns_feeder dnsmasq kube-scheduler kube-controller-manager kubelet kube-apiserver etcd dockerd)

pid_of() {
  local f=$E2E_STATE/pids/$1.pid
  [[ -f $f ]] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"
}
# start NAME COMMAND...: a daemon in its own session, output to logs/NAME.log.
start() {
  local name=$1
  shift
  setsid "$@" >"$E2E_STATE/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$E2E_STATE/pids/$name.pid"
}
# wait_for WHAT SECONDS COMMAND...: polls COMMAND every 0.5 s.
wait_for() {
  local what=$1 limit=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$what not up within ${limit} s (logs in $E2E_STATE/logs)"
    sleep 0.5
  done
}
kc() { "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

certificates() {
  local pki=$E2E_STATE/pki
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
      -subj "/CN=ringd-e2e-ca" 2>/dev/null
    # leaf NAME SUBJECT [SANS]
    leaf() {
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      if [[ -n ${3:-} ]]; then
        printf 'subjectAltName=%s\n' "$3" >"$1.ext"
        openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
          -extfile "$1.ext" -out "$1.crt" 2>/dev/null
      else
        openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
          -out "$1.crt" 2>/dev/null
      fi
    }
    leaf apiserver "/CN=kube-apiserver" \
      "IP:127.0.0.1,IP:$BRIDGE_IP,IP:${SERVICE_RANGE%.0/24}.1,DNS:localhost,DNS:kubernetes.default.svc"
    leaf apiserver-kubelet-client "/CN=kube-apiserver-kubelet-client/O=system:masters"
    leaf kubelet "/CN=$NODE" "IP:$BRIDGE_IP,DNS:$NODE"
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
  local token
  token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  echo "$token,ringd-e2e-admin,ringd-e2e-admin,system:masters" >"$pki/tokens.csv"
  cat >"$KUBECONFIG_FILE" <<KC
apiVersion: v1
kind: Config
clusters:
  - name: e2e
    cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$pki/ca.crt"}
users:
  - name: admin
    user: {token: "$token"}
contexts:
  - name: e2e
    context: {cluster: e2e, user: admin, namespace: default}
current-context: e2e
KC
  chmod 600 "$KUBECONFIG_FILE" "$pki/tokens.csv"
}

up() {
  need_root
  if [[ -n $(pid_of kube-apiserver || true) ]]; then
    say "already up (scripts/e2e/cluster.sh down first to start afresh)"
    return 0
  fi
  [[ ! -e $E2E_STATE ]] || down_quiet
  need_packages etcd-server docker.io runc jq dnsmasq-base openssl iproute2 iptables procps \
    python3-venv
  "$E2E_DIR/k8s_build.sh"
  "$REPO_ROOT/scripts/validate_k8s.sh" --install-only
  mkdir -p "$E2E_STATE"/{pids,logs,dns,pv} "$E2E_CACHE/docker"
  local s
  for s in "${SYSCTLS[@]}"; do echo "$s=$(sysctl -n "$s")"; done >"$E2E_STATE/sysctls.saved"
  certificates

  ip link add "$BRIDGE" type bridge
  ip addr add "$BRIDGE_CIDR" dev "$BRIDGE"
  ip link set "$BRIDGE" up

  # dockerd: its own socket, bridge and exec root; no iptables rules, no masquerading, no IP
  # forwarding (the pods talk over the bridge only); runc through runc_clamp.sh.
  start dockerd dockerd --host "unix://$DOCKER_SOCK" --data-root "$E2E_CACHE/docker" \
    --exec-root "$E2E_STATE/docker-exec" --pidfile "$E2E_STATE/dockerd.pid" \
    --bridge "$BRIDGE" --iptables=false --ip-masq=false --ip-forward=false \
    --exec-opt native.cgroupdriver=cgroupfs --add-runtime "clamp=$E2E_DIR/runc_clamp.sh" \
    --default-runtime clamp
  wait_for dockerd 60 "$DOCKER" -H "unix://$DOCKER_SOCK" info
  if ! "$DOCKER" -H "unix://$DOCKER_SOCK" image inspect "$PAUSE_IMAGE" >/dev/null 2>&1; then
    tar -C "$K8S_BIN" -c pause | "$DOCKER" -H "unix://$DOCKER_SOCK" import \
      --change 'ENTRYPOINT ["/pause"]' - "$PAUSE_IMAGE" >/dev/null
  fi

  start etcd etcd --name e2e --data-dir "$E2E_STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls http://127.0.0.1:23380 --initial-advertise-peer-urls http://127.0.0.1:23380 \
    --initial-cluster e2e=http://127.0.0.1:23380
  local pki=$E2E_STATE/pki
  start kube-apiserver "$K8S_BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address "$BRIDGE_IP" --secure-port "$API_PORT" \
    --insecure-port 0 --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" \
    --authorization-mode Node,RBAC --service-cluster-ip-range "$SERVICE_RANGE" \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$pki/ca.crt" \
    --kubelet-preferred-address-types InternalIP --allow-privileged=true
  wait_for "the API server" 120 kc get --raw /readyz
  start kube-controller-manager "$K8S_BIN/kube-controller-manager" --kubeconfig "$KUBECONFIG_FILE" \
    --leader-elect=false --service-account-private-key-file "$pki/sa.key" \
    --root-ca-file "$pki/ca.crt" --use-service-account-credentials=false \
    --bind-address 127.0.0.1 --port 0
  start kube-scheduler "$K8S_BIN/kube-scheduler" --kubeconfig "$KUBECONFIG_FILE" \
    --leader-elect=false --bind-address 127.0.0.1 --port 0

  # dnsmasq answers cluster.local only (--local: never forwarded), from the feeder's hosts file.
  : >"$E2E_STATE/dns/hosts"
  start dnsmasq dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts \
    --listen-address "$BRIDGE_IP" --bind-interfaces --local "/$DOMAIN/" \
    --addn-hosts "$E2E_STATE/dns/hosts" --pid-file="$E2E_STATE/dns/dnsmasq.pid" --log-queries \
    --log-facility=-
  wait_for dnsmasq 10 test -s "$E2E_STATE/dns/dnsmasq.pid"
  start dns_feeder "$E2E_DIR/dns_feeder.sh" "$KUBECTL" "$KUBECONFIG_FILE" "$E2E_STATE/dns/hosts" \
    "$E2E_STATE/dns/dnsmasq.pid" "$DOMAIN"

  # The kubelet: dockershim on our dockerd, the cgroupfs driver, no QoS cgroup tree (this VM's
  # hybrid cgroups), no iptables chains, no swap check, the pods' DNS on the bridge; it listens on
  # the bridge address, where the API server reaches it for logs and exec (client cert checked).
  # No image garbage collection: the images exist only in this node's dockerd (pull policy
  # Never), and at the default 85% disk the kubelet deleted the TensorFlow image before its job
  # ran (ErrImageNeverPull) on this shared machine's disk.
  mkdir -p "$E2E_STATE/kubelet"
  start kubelet "$K8S_BIN/kubelet" --kubeconfig "$KUBECONFIG_FILE" \
    --root-dir "$E2E_STATE/kubelet" --cert-dir "$E2E_STATE/kubelet/pki" \
    --tls-cert-file "$pki/kubelet.crt" --tls-private-key-file "$pki/kubelet.key" \
    --container-runtime docker --docker-endpoint "unix://$DOCKER_SOCK" --cgroup-driver cgroupfs \
    --pod-infra-container-image "$PAUSE_IMAGE" --image-pull-progress-deadline 10s \
    --hostname-override "$NODE" --node-ip "$BRIDGE_IP" --address "$BRIDGE_IP" \
    --client-ca-file "$pki/ca.crt" --anonymous-auth=false --authorization-mode AlwaysAllow \
    --read-only-port 0 --healthz-bind-address 127.0.0.1 --healthz-port 10248 \
    --cluster-dns "$BRIDGE_IP" --cluster-domain "$DOMAIN" --resolv-conf "" \
    --fail-swap-on=false --cgroups-per-qos=false --enforce-node-allocatable "" \
    --make-iptables-util-chains=false --oom-score-adj 0 \
    --eviction-hard "memory.available<200Mi,nodefs.available<2%,imagefs.available<2%" \
    --image-gc-high-threshold 100 --image-gc-low-threshold 99 \
    --serialize-image-pulls=false
  wait_for "the node" 120 kc wait --for=condition=Ready "node/$NODE" --timeout=1s
  # Workloads are admitted once the default ServiceAccount exists (the controller manager makes it).
  wait_for "the default ServiceAccount" 60 kc get serviceaccount default
  say "up: $(kc get node "$NODE" -o jsonpath='{.status.nodeInfo.kubeletVersion}') on $NODE; KUBECONFIG=$KUBECONFIG_FILE"
}

down_quiet() { down >/dev/null 2>&1 || true; }

down() {
  need_root
  [[ -d $E2E_STATE ]] || {
    say "down: nothing to do"
    return 0
  }
  local name pid
  # The kubelet first, so it restarts nothing; then every container, then the rest.
  pid=$(pid_of kubelet || true)
  [[ -z $pid ]] || { kill "$pid" 2>/dev/null; sleep 1; }
  if [[ -S $DOCKER_SOCK ]]; then
    local ids
    mapfile -t ids < <("$DOCKER" -H "unix://$DOCKER_SOCK" ps -aq 2>/dev/null || true)
    ((${#ids[@]} == 0)) || "$DOCKER" -H "unix://$DOCKER_SOCK" rm -f "${ids[@]}" >/dev/null 2>&1 || true
  fi
  for name in "${DAEMONS[@]}"; do
    pid=$(pid_of "$name" || true)
    [[ -n $pid ]] || continue
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  done
  # The kubelet's and dockerd's mounts (secrets, memory emptyDirs, network namespaces), deepest first.
  local m
  while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(
    awk -v a="$E2E_STATE" -v b="$E2E_CACHE/docker" 'index($2, a) == 1 || index($2, b) == 1 { print $2 }' \
      /proc/mounts | sort -r)
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
  if [[ -f $E2E_STATE/sysctls.saved ]]; then
    local line
    while read -r line; do sysctl -q -w "$line" >/dev/null 2>&1 || true; done <"$E2E_STATE/sysctls.saved"
  fi
  # Logs of the last run stay beside the cache for reading; the state goes.
  rm -rf "$E2E_CACHE/last-logs"
  [[ ! -d $E2E_STATE/logs ]] || cp -r "$E2E_STATE/logs" "$E2E_CACHE/last-logs"
  rm -rf "$E2E_STATE"
  local left
  left=$(pgrep -a -f "$E2E_STATE|$K8S_BIN|ringd-e2e0" || true)
  [[ -z $left ]] || die "still running after down:
$left"
  say "down: stopped, sysctls restored, bridge and state removed (logs: $E2E_CACHE/last-logs)"
}

status() {
  local name pid
  for name in "${DAEMONS[@]}"; do
    pid=$(pid_of "$name" || true)
    if [[ -n $pid ]]; then
      printf '%-24s running (pid %s)\n' "$name" "$pid"
    else
      printf '%-24s not running\n' "$name"
    fi
  done
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  env) echo "export KUBECONFIG=$KUBECONFIG_FILE KUBECTL=$KUBECTL DOCKER_HOST=unix://$DOCKER_SOCK" ;;
  *)
    sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    [[ ${1:-} == -h || ${1:-} == --help ]] || exit 2
    ;;
esac
