# shellcheck shell=bash disable=SC2034,SC2154  # *_NOTE/*_WHY are read by the caller; work, NS, k() are its
# scripts/e2e_k8s.sh's report and its kubectl steps. Sourced after lib.sh, with k() (kubectl in the
# suite's namespace), NS, KUBECTL, KUBECONFIG and E2E_STATE set. The judgements themselves are in
# e2e_lib.py (unit-tested); these functions fetch what they judge.

REPORT=()
section() { REPORT+=("" "== $* =="); say "$*"; }
note() { REPORT+=("$*"); }
print_report() { printf '%s\n' "${REPORT[@]}"; }
pass() {
  print_report
  echo "e2e: PASS $*"
  exit 0
}
fail() {
  print_report
  echo "e2e: FAIL $*"
  exit 1
}

# make_e2e_overlay K8S_DIR NAME OVERLAY PREFIX [retention [THROTTLE_MS]]: K8S_DIR/e2e/NAME, the
# bundled OVERLAY with a name prefix and only what a one-node, 2-core v1.20 cluster needs (see
# e2e_k8s.sh); THROTTLE_MS: `ringd train --throttle-ms` appended to the command.
make_e2e_overlay() {
  local dir=$1/e2e/$2 overlay=$3 prefix=$4 retention=${5:-} throttle=${6:-}
  mkdir -p "$dir"
  cat >"$dir/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namePrefix: $prefix
resources:
  - ../../overlays/$overlay
patches:
  - target:
      kind: StatefulSet
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/imagePullPolicy
        value: Never
      - op: replace
        path: /spec/template/spec/containers/0/resources
        value:
          requests: {cpu: 100m, memory: 256Mi}
          limits: {cpu: "2", memory: 2Gi}
YAML
  if [[ -n $retention ]]; then
    cat >>"$dir/kustomization.yaml" <<YAML
  - target:
      kind: StatefulSet
      name: ringd
    patch: |-
      - op: remove
        path: /spec/persistentVolumeClaimRetentionPolicy
YAML
  fi
  # The lost-pod check deletes a pod after the first checkpoint: 468 steps at full speed can end
  # before the pod's SIGTERM arrives (it did once, in 2.6 s), so those jobs sleep after each step
  # (ringd train --throttle-ms: the numbers are unchanged).
  if [[ -n $throttle ]]; then
    cat >>"$dir/kustomization.yaml" <<YAML
  - target:
      kind: StatefulSet
      name: ringd
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: "--throttle-ms"
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: "$throttle"
YAML
  fi
}

# make_pvs N: N hostPath PersistentVolumes of 1 GiB (no provisioner on this node), owned by the
# image's user so that the pods (uid 10001) can write them.
make_pvs() {
  local i dir
  for ((i = 0; i < $1; i++)); do
    dir=$E2E_STATE/pv/$i
    mkdir -p "$dir"
    chown 10001:10001 "$dir"
    cat <<YAML
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: e2e-pv-$i}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: "$dir", type: Directory}
YAML
  done | "$KUBECTL" --kubeconfig "$KUBECONFIG" apply -f - >/dev/null || fail "creating the PersistentVolumes failed"
}

pod_table() {
  k get pods -o custom-columns='POD:.metadata.name,PHASE:.status.phase,READY:.status.containerStatuses[0].ready,RESTARTS:.status.containerStatuses[0].restartCount,IP:.status.podIP,NODE:.spec.nodeName' 2>&1
}

# wait_pods_ready STATEFULSET N SECONDS
wait_pods_ready() {
  local sts=$1 n=$2 deadline=$((SECONDS + $3)) ready
  while ((SECONDS < deadline)); do
    ready=$(k get pods -l "app.kubernetes.io/instance=$sts" \
      -o jsonpath='{range .items[*]}{.status.containerStatuses[0].ready}{"\n"}{end}' 2>/dev/null |
      grep -c true)
    ((ready == n)) && return 0
    sleep 1
  done
  return 1
}

# wait_pod_replaced POD OLD_UID SECONDS: the pod exists again under a new uid and is Ready.
wait_pod_replaced() {
  local pod=$1 old=$2 deadline=$((SECONDS + $3)) uid ready
  while ((SECONDS < deadline)); do
    uid=$(k get pod "$pod" -o jsonpath='{.metadata.uid}' 2>/dev/null || true)
    ready=$(k get pod "$pod" -o jsonpath='{.status.containerStatuses[0].ready}' 2>/dev/null || true)
    [[ -n $uid && $uid != "$old" && $ready == true ]] && return 0
    sleep 0.5
  done
  return 1
}

# wait_first_checkpoint POD SECONDS: sets CHECKPOINT_NAME, or CHECKPOINT_WHY.
wait_first_checkpoint() {
  local pod=$1 deadline=$((SECONDS + $2))
  CHECKPOINT_NAME='' CHECKPOINT_WHY=''
  while ((SECONDS < deadline)); do
    CHECKPOINT_NAME=$(k exec "$pod" -- ls /var/lib/ringd/checkpoints 2>/dev/null | grep '^ckpt-' | head -n1 || true)
    [[ -n $CHECKPOINT_NAME ]] && return 0
    if k exec "$pod" -- test -e /var/lib/ringd/launch.done 2>/dev/null; then
      CHECKPOINT_WHY="$pod's job finished before a checkpoint was seen: nothing left to interrupt"
      return 1
    fi
    sleep 0.5
  done
  CHECKPOINT_WHY="no checkpoint in $pod:/var/lib/ringd/checkpoints within $2 s:
$(k logs "$pod" --tail=20 2>&1)"
  return 1
}

# sample_tcp POD FILE: pod 0's established connections (its own /proc/net/tcp, in its network
# namespace), sampled 10 times a second into FILE, in the background (the job's training can be
# over in seconds); an exec that ends early is started again (its errors in FILE.err). Sets
# SAMPLER: stop_sampler ends it once the job has ended.
sample_tcp() {
  (
    while :; do
      # shellcheck disable=SC2016  # expanded by the pod's sh
      k exec "$1" -- sh -c 'i=0; while [ $i -lt 600 ]; do awk "\$4 == \"01\"" /proc/net/tcp; sleep 0.1; i=$((i + 1)); done' \
        2>>"$2.err" || sleep 0.5
    done
  ) >"$2" &
  SAMPLER=$!
}
stop_sampler() {
  pkill -P "$SAMPLER" 2>/dev/null
  kill "$SAMPLER" 2>/dev/null
  wait "$SAMPLER" 2>/dev/null
  pkill -P "$SAMPLER" 2>/dev/null || true
}

# check_pod_network STATEFULSET N FILE: the connections sampled in FILE ran between the pods' own
# addresses. Sets NETWORK_NOTE or NETWORK_WHY.
check_pod_network() {
  local sts=$1 n=$2 file=$3 ips=() i host_ips out
  for ((i = 0; i < n; i++)); do ips+=("$(k get pod "$sts-$i" -o jsonpath='{.status.podIP}')"); done
  host_ips=$(hostname -I 2>/dev/null || true)
  for i in "${ips[@]}"; do
    if [[ -z $i || " $host_ips " == *" $i "* ]]; then
      NETWORK_WHY="pod address '$i' is empty or one of the host's ($host_ips): not the pod's own network"
      return 1
    fi
  done
  local listening
  if ! listening=$(k logs "$sts-0" | "$E2E_DIR/e2e_lib.py" listeners "${ips[@]}"); then
    NETWORK_WHY=$listening
    return 1
  fi
  if out=$("$E2E_DIR/e2e_lib.py" peers "${ips[@]}" <"$file"); then
    NETWORK_NOTE="$listening; $out; the pods' addresses are on the cluster bridge, not the host's ($host_ips); $(grep -c . "$file") lines sampled, $(awk 'END { print NR }' "$file.err" 2>/dev/null || echo 0) exec attempts refused (before the pod ran)"
    return 0
  fi
  NETWORK_WHY="$out ($(grep -c . "$file") sampled lines; the sampler's errors: $(tail -n 3 "$file.err" 2>/dev/null))"
  return 1
}

# check_restart_result REFERENCE RESTARTED: sets RESTART_NOTE or RESTART_WHY.
check_restart_result() {
  local out
  if out=$("$E2E_DIR/e2e_lib.py" restart "$1" "$2"); then
    RESTART_NOTE=$out
    return 0
  fi
  RESTART_WHY=$out
  return 1
}

wait_no_pods() {
  local deadline=$((SECONDS + $1))
  while ((SECONDS < deadline)); do
    [[ -z $(k get pods -o name 2>/dev/null) ]] && return 0
    sleep 1
  done
  return 1
}

# read_outcome NAME STATEFULSET SUMMARY TIMEOUT: how the job ended, asked the documented way
# (`kubectl exec POD-0 -- ringd status --wait`, at most TIMEOUT s; FAIL unless it trained), and its
# train.json from pod 0 into WORK/train-NAME.json, judged by `e2e_lib.py SUMMARY`; notes both.
read_outcome() {
  local name=$1 sts=$2 kind=$3 limit=$4 out rc
  out=$(timeout "$limit" "$KUBECTL" --kubeconfig "$KUBECONFIG" -n "$NS" exec "$sts-0" -- \
    ringd status --wait 2>&1)
  rc=$?
  note "$name: kubectl exec $sts-0 -- ringd status --wait: exit $rc: $(head -n1 <<<"$out")"
  ((rc == 0)) || fail "the $name job did not train (ringd status --wait exit $rc): $out
$(k logs "$sts-0" --tail=30 2>&1)"
  k exec "$sts-0" -- cat /var/lib/ringd/train.json >"$work/train-$name.json" ||
    fail "cannot read the $name job's train.json from $sts-0"
  note "$name: $("$E2E_DIR/e2e_lib.py" "$kind" "$work/train-$name.json")"
}

# run_job NAME STATEFULSET SUMMARY TIMEOUT: applies WORK/k8s/e2e/NAME, waits for its 4 worker pods,
# reads how it ended (read_outcome), notes the pods, deletes the job. Needs `work`.
run_job() {
  local name=$1 sts=$2 kind=$3 limit=$4 t0=$SECONDS
  k apply -k "$work/k8s/e2e/$name" >"$work/apply-$name.log" 2>&1 ||
    fail "kubectl apply -k of the $name job failed: $(cat "$work/apply-$name.log")"
  wait_pods_ready "$sts" 4 240 || fail "the $name job's pods were not Ready within 240 s:
$(pod_table)"
  read_outcome "$name" "$sts" "$kind" "$limit"
  note "$name: trained $((SECONDS - t0)) s after apply"
  while read -r line; do note "  $line"; done < <(pod_table)
  k delete -k "$work/k8s/e2e/$name" --wait=false >/dev/null 2>&1
  wait_no_pods 120 || fail "the $name job's pods did not go within 120 s of kubectl delete -k"
}
