#!/usr/bin/env bash
# The real-cluster suite (opt-in, not part of scripts/test.sh): ringd's images built, a real
# single-node Kubernetes started on this machine, the bundled manifests applied to it, and the
# training jobs they describe run, lose a pod and finish. One command; as root on Debian 12:
#
#   scripts/e2e_k8s.sh
#
# 1. scripts/e2e/build_images.sh: the CPU image (Dockerfile, VARIANT=cpu, FROM Debian 12) built
#    with podman, `ringd --version` and the demo's 4-rank training in a container;
# 2. scripts/e2e/cluster.sh up: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
#    the kubelet (v1.20.2, built once from Debian's source: ~20 min the first time), dockerd, the
#    cluster DNS; the images copied into dockerd;
# 3. `kubectl apply -k` of k8s/overlays/cpu twice, as two jobs in one namespace (namePrefix e2e-a-
#    and e2e-b-), each 4 pods whose agents run `ringd launch` -> mpirun -> `ringd train` across the
#    pods through `ringd exec`. Mid-training (after job b's first checkpoint) one of job b's pods is
#    deleted; the StatefulSet brings it back, launch restarts from the checkpoint on the persistent
#    volume, and job b must end with bitwise job a's parameters (params_sha256 in train.json). The
#    outcome is read with the documented `kubectl exec POD -- ringd status --wait`. Then the ps
#    overlay (4 workers, 2 parameter servers). Every overlay is also dry-run on the server.
# 4. a report (times, pod states and IPs, accuracies, the restart) ending in one line,
#    `e2e: PASS ...` (exit 0) or `e2e: FAIL <why>` (exit 1).
#
# What the e2e overlays change for a one-node, 2-core cluster (and nothing else): CPU and memory
# requests (the bundled 2 CPUs per pod would not schedule 4 pods here), imagePullPolicy Never
# (the images exist only in this node's dockerd), and, because v1.20 predates it (Kubernetes
# 1.27), the StatefulSet's persistentVolumeClaimRetentionPolicy removed. Persistent volumes are
# hostPath PVs made by this script (no provisioner on one node).
#
#   RINGD_E2E_KEEP=1     leave the cluster up at the end (scripts/e2e/cluster.sh down stops it)
#   RINGD_E2E_CACHE, RINGD_E2E_STATE   see scripts/e2e/lib.sh
set -uo pipefail
E2E_NAME=e2e
# shellcheck source=scripts/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/e2e/lib.sh"
[[ ${1:-} != -h && ${1:-} != --help ]] || {
  sed -n '2,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 0
}
need_root
# shellcheck source=scripts/e2e/report.sh
source "$E2E_DIR/report.sh"

NS=ringd-e2e
pytorch=1 tensorflow=1
[[ ${RINGD_E2E_PYTORCH:-1} != 0 ]] || pytorch=0
[[ ${RINGD_E2E_TENSORFLOW:-1} != 0 ]] || tensorflow=0
t_start=$SECONDS
work=$(mktemp -d /tmp/ringd-e2e.XXXXXX)
# shellcheck disable=SC2317  # run by the trap
cleanup() {
  rm -rf "$work"
  if [[ ${RINGD_E2E_KEEP:-0} == 1 ]]; then
    say "RINGD_E2E_KEEP=1: the cluster stays up ($("$E2E_DIR/cluster.sh" env))"
  else
    "$E2E_DIR/cluster.sh" down >&2 || say "cluster.sh down failed"
  fi
}
trap cleanup EXIT

# ---- 1. images --------------------------------------------------------------------------------
section "images"
t0=$SECONDS
image_args=()
((pytorch)) && image_args+=(--pytorch)
((tensorflow)) && image_args+=(--tensorflow)
out=$("$E2E_DIR/build_images.sh" "${image_args[@]}" 2>&1) || fail "building or running the images failed:
$(tail -n 25 <<<"$out")"
while read -r line; do note "${line#build_images: }"; done < <(grep '^build_images: ' <<<"$out")
note "images built and run in $((SECONDS - t0)) s"

# ---- 2. the cluster ---------------------------------------------------------------------------
section "cluster"
t0=$SECONDS
out=$("$E2E_DIR/cluster.sh" up 2>&1) || fail "the cluster did not come up:
$(tail -n 25 <<<"$out")"
note "$(grep '^cluster: up' <<<"$out" | sed 's/^cluster: //')"
note "cluster up in $((SECONDS - t0)) s (Kubernetes build included when it was not cached)"
eval "$("$E2E_DIR/cluster.sh" env)"
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" -n "$NS" "$@"; }
use_podman_conf
t0=$SECONDS
images=(ringd:0.1.0-cpu)
((pytorch)) && images+=(ringd-pytorch:0.1.0)
((tensorflow)) && images+=(ringd-tensorflow:0.1.0)
for image in "${images[@]}"; do
  if ! podman save --format docker-archive "localhost/$image" | "$DOCKER" load >/dev/null ||
    ! "$DOCKER" tag "localhost/$image" "$image"; then
    fail "copying $image from podman into the cluster's dockerd failed"
  fi
done
# The node's copies of earlier runs' images, replaced now, go too (dangling only).
"$DOCKER" image prune --force >/dev/null 2>&1 || note "docker image prune failed"
note "images copied into the node's dockerd in $((SECONDS - t0)) s: ${images[*]}"

# ---- 3. the manifests, applied ----------------------------------------------------------------
cp -r "$REPO_ROOT/k8s" "$work/k8s"
head -c 32 /dev/urandom | base64 >"$work/k8s/base/job-secret"
make_e2e_overlay "$work/k8s" a cpu e2e-a- retention 20
make_e2e_overlay "$work/k8s" b cpu e2e-b- retention 20
make_e2e_overlay "$work/k8s" ps ps e2e-ps-
make_e2e_overlay "$work/k8s" pt pytorch e2e-pt-
make_e2e_overlay "$work/k8s" tf tensorflow e2e-tf-
k create namespace "$NS" >/dev/null 2>&1 || true
make_pvs 8

section "server-side dry run of every bundled overlay (Kubernetes v1.20.2)"
for dir in "$REPO_ROOT"/k8s/overlays/*/; do
  overlay=$(basename "$dir")
  if msg=$(k apply --dry-run=server -k "$work/k8s/overlays/$overlay" 2>&1); then
    note "$overlay: accepted"
  else
    note "$overlay: refused: $(grep -m1 -o 'error.*' <<<"$msg" | cut -c1-160)"
  fi
done

section "two cpu jobs in one namespace (e2e-a-, e2e-b-)"
t0=$SECONDS
for job in a b; do
  k apply -k "$work/k8s/e2e/$job" >"$work/apply-$job.log" 2>&1 ||
    fail "kubectl apply -k of the cpu overlay (job $job) failed: $(cat "$work/apply-$job.log")"
done
note "applied: $(grep -c . "$work/apply-a.log") objects per job"
# From the first moment pod 0 runs: a job's training can be over 3 s after its pods are Ready.
sample_tcp e2e-a-ringd-0 "$work/tcp-a.txt"
for job in a b; do
  wait_pods_ready "e2e-$job-ringd" 4 240 || fail "job $job's pods were not Ready within 240 s:
$(pod_table)"
done
note "8 pods Ready $((SECONDS - t0)) s after apply"
while read -r line; do note "  $line"; done < <(pod_table)

# Mid-training: once job b's rank 0 has written its first checkpoint, delete one of its pods.
victim=e2e-b-ringd-2
old_uid=$(k get pod "$victim" -o jsonpath='{.metadata.uid}')
wait_first_checkpoint e2e-b-ringd-0 300 || fail "$CHECKPOINT_WHY"
note "job b: first checkpoint after $((SECONDS - t0)) s ($CHECKPOINT_NAME); deleting pod $victim"
k delete pod "$victim" --wait=false >/dev/null || fail "kubectl delete pod $victim failed"
t_del=$SECONDS
wait_pod_replaced "$victim" "$old_uid" 180 || fail "the StatefulSet did not bring $victim back within 180 s"
note "$victim back (new uid) and Ready $((SECONDS - t_del)) s after the delete"

for job in a b; do read_outcome "$job" "e2e-$job-ringd" summary 900; done
note "both jobs finished $((SECONDS - t0)) s after apply"
stop_sampler
check_pod_network e2e-a-ringd 4 "$work/tcp-a.txt" || fail "$NETWORK_WHY"
note "$NETWORK_NOTE"
for job in a b; do k logs "e2e-$job-ringd-0" >"$work/launch-$job.log" 2>&1; done
note "job b's launch log (pod 0), its lines about the lost pod and the restart:"
while read -r line; do note "  ${line:0:160}"; done < <(
  grep -E '^ringd (launch|agent)' "$work/launch-b.log" | grep -i -E 'restart|resum|lost|fail|answer|signal' | head -n 10)
for job in a b; do
  warnings=$(grep -c 'WARNING' "$work/launch-$job.log" || true)
  note "job $job: pod 0's log has $warnings WARNING line(s)$( ((warnings == 0)) || echo ": $(grep -m1 WARNING "$work/launch-$job.log" | cut -c1-120)")"
done
check_restart_result "$work/train-a.json" "$work/train-b.json" || fail "$RESTART_WHY"
note "$RESTART_NOTE"
k delete -k "$work/k8s/e2e/a" --wait=false >/dev/null 2>&1
k delete -k "$work/k8s/e2e/b" --wait=false >/dev/null 2>&1
wait_no_pods 120 || fail "the cpu jobs' pods did not go within 120 s of kubectl delete -k"

section "the ps overlay (4 workers, 2 parameter servers)"
run_job ps e2e-ps-ringd summary 900

if ((pytorch)); then
  section "the pytorch overlay (examples/pytorch/fashion_mnist.py through ringd.torch, 4 pods)"
  run_job pt e2e-pt-ringd torch-summary 1500
fi
if ((tensorflow)); then
  section "the tensorflow overlay (examples/tensorflow/keras_fashion_mnist.py through ringd.keras, 4 pods)"
  run_job tf e2e-tf-ringd torch-summary 1500
fi

section "not run here"
note "cpu-job (the Indexed Job form): needs Kubernetes 1.31 (success policy; pod failure policy 1.26,"
note "  Indexed Jobs 1.24); v1.20 refuses it (above); validated offline against 1.32 (scripts/validate_k8s.sh)"
pass "images built and run; cpu overlay x2 trained, a pod deleted and the job resumed bitwise; ps trained$( ((pytorch)) && echo "; pytorch trained")$( ((tensorflow)) && echo "; tensorflow trained"); $((SECONDS - t_start)) s"
