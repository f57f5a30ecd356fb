#!/usr/bin/env python3
"""scripts/validate_k8s.sh must fail, naming the overlay and the defect, on broken manifests.

Copies k8s/ and the Dockerfile into a temporary tree, injects one defect per overlay (each of a
kind the script exists to catch), runs the script on the copy (RINGD_VALIDATE_ROOT) with a fake
ringd whose `train --help` lacks --model, and checks that it exits 1 and that every defect is
reported. The same script passing on the real tree is the k8s_validate test.

  validate_rejects_test.py REPO_ROOT
"""
import os
import shutil
import stat
import subprocess
import sys
import tempfile

# (overlay, patch appended to its kustomization.yaml, text that must appear in the report)
UNKNOWN_FIELD = """
  - target: {kind: StatefulSet, name: ringd}
    patch: |-
      - op: add
        path: /spec/podManagmentPolicy
        value: Parallel
"""
WRONG_TYPE = """
  - target: {kind: StatefulSet, name: ringd}
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/ports/0/containerPort
        value: "29400"
"""
BAD_PATH = """
  - target: {kind: StatefulSet, name: ringd}
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/7/args
        value: []
"""
AS_ROOT = """
  - target: {kind: StatefulSet, name: ringd}
    patch: |-
      - op: replace
        path: /spec/template/spec/securityContext/runAsUser
        value: 0
      - op: replace
        path: /spec/template/spec/securityContext/runAsNonRoot
        value: false
"""
DANGLING_MOUNT = """
  - target: {kind: StatefulSet, name: ringd}
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/volumeMounts/3/name
        value: scratch
"""
STALE_REPLICAS = """
configMapGenerator:
  - name: ringd-job
    behavior: merge
    literals:
      - RINGD_REPLICAS=7
      - RINGD_IB_GID_IDX=3
"""

FAKE_RINGD = """#!/bin/sh
# A ringd whose commands know only some flags: enough for check_manifests.py's flag check.
case "$1 $2" in
  "agent --help") echo "Usage: ringd agent [--exec-port N] [--http-port N] [-- LAUNCH...]";;
  "launch --help") echo "Usage: ringd launch [--iface NAME] [--marker PATH] [-- COMMAND...]";;
  "train --help") echo "Usage: ringd train [--epochs N]";;
  *) echo "ringd: unknown command $1" >&2; exit 109;;
esac
"""


def main():
    repo = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="ringd-k8s-rejects-") as tmp:
        shutil.copytree(os.path.join(repo, "k8s"), os.path.join(tmp, "k8s"),
                        ignore=shutil.ignore_patterns("job-secret"))
        shutil.copy(os.path.join(repo, "Dockerfile"), tmp)
        overlays = os.path.join(tmp, "k8s", "overlays")

        def append(overlay, text):
            with open(os.path.join(overlays, overlay, "kustomization.yaml"), "a") as f:
                f.write(text)

        # The cpu overlay already has a `patches:` list; the others get theirs appended to it.
        append("cpu", UNKNOWN_FIELD)
        append("gpu", WRONG_TYPE)
        gpu = os.path.join(overlays, "gpu", "kustomization.yaml")
        with open(gpu) as f:
            text = f.read()
        with open(gpu, "w") as f:  # metrics where neither the agent's volume nor a reader is
            f.write(text.replace("      - NCCL_DEBUG=WARN\n",
                                 "      - NCCL_DEBUG=WARN\n      - RINGD_METRICS_FILE=/tmp/m.prom\n"))
        append("bench", BAD_PATH)
        append("rdma", STALE_REPLICAS)
        append("rdma-host-network", DANGLING_MOUNT)
        shutil.copytree(os.path.join(overlays, "cpu"), os.path.join(overlays, "root"))
        with open(os.path.join(overlays, "root", "kustomization.yaml")) as f:
            text = f.read().replace(UNKNOWN_FIELD, AS_ROOT)
        with open(os.path.join(overlays, "root", "kustomization.yaml"), "w") as f:
            f.write(text)
        rdma = os.path.join(overlays, "rdma", "kustomization.yaml")
        with open(rdma) as f:
            text = f.read()
        with open(rdma, "w") as f:  # a training job that a lost pod would end for good
            f.write(text.replace('"--max-restarts"\n          - "3"',
                                 '"--max-restarts"\n          - "0"'))
        job = os.path.join(tmp, "k8s", "components", "indexed-job", "kustomization.yaml")
        with open(job) as f:
            text = f.read()
        with open(job, "w") as f:  # a Job that would wait for every pod's agent to exit
            f.write(text.replace('succeededIndexes: "0"', 'succeededIndexes: "1"'))
        ps = os.path.join(overlays, "ps", "kustomization.yaml")
        with open(ps) as f:
            text = f.read()
        with open(ps, "w") as f:
            f.write(text.replace("    count: 2", "    count: 3"))  # ringd-ps: 3 servers, 2 listed
        service = os.path.join(overlays, "ps", "ps-service.yaml")
        with open(service) as f:
            text = f.read()
        with open(service, "w") as f:
            f.write(text.replace("publishNotReadyAddresses: true", "publishNotReadyAddresses: false"))
        with open(os.path.join(tmp, "Dockerfile")) as f:
            text = f.read()
        with open(os.path.join(tmp, "Dockerfile"), "w") as f:
            f.write(text.replace("FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu22.04",
                                 "FROM nvidia/cuda:latest"))
        fake = os.path.join(tmp, "ringd")
        with open(fake, "w") as f:
            f.write(FAKE_RINGD)
        os.chmod(fake, stat.S_IRWXU)

        env = dict(os.environ, RINGD_VALIDATE_ROOT=tmp, RINGD_BINARY=fake)
        result = subprocess.run([os.path.join(repo, "scripts", "validate_k8s.sh")], cwd=repo,
                                env=env, capture_output=True, text=True, timeout=540)
        report = result.stdout + result.stderr
        print(report)

    expected = [
        ("unknown field", "k8s/overlays/cpu is not valid Kubernetes"),
        ("unknown field named", "'podManagmentPolicy' was unexpected"),
        ("wrong type", "k8s/overlays/gpu is not valid Kubernetes"),
        ("wrong type named", "'29400' is not of type 'integer'"),
        ("patch that does not apply", "k8s/overlays/bench does not render"),
        ("RINGD_REPLICAS out of step", "rdma: StatefulSet/ringd container ringd: RINGD_REPLICAS=7 "
                                       "but the StatefulSet has 4 pods"),
        ("a variable ringd does not read", "rdma: StatefulSet/ringd container ringd: sets "
                                           "RINGD_IB_GID_IDX, which neither"),
        ("metrics file off the job volume", "RINGD_METRICS_FILE=/tmp/m.prom: it must name a file "
                                            "in /var/lib/ringd"),
        ("root without IPC_LOCK", "root: StatefulSet/ringd container ringd: runs as root"),
        ("Service not publishing not-ready pods", "ps: StatefulSet/ringd-ps: Service ringd-ps "
                                                  "lacks publishNotReadyAddresses"),
        ("--ps-servers out of step", "ps: StatefulSet/ringd --ps-servers: lists "
                                     "ringd-ps-0.ringd-ps:29500,ringd-ps-1.ringd-ps:29500, but"),
        ("a flag ringd does not have", "`ringd train` has no flag --model"),
        ("a Job done only when every agent exits", "cpu-job: Job/ringd: no success policy on "
                                                    "index 0"),
        ("a training job without restarts", "rdma: StatefulSet/ringd container ringd: launch's "
                                            "--max-restarts is 0"),
        ("unchecked command noted", "`ringd ps` is not in this ringd binary"),
        ("a mount of no volume", "rdma-host-network: StatefulSet/ringd container ringd: mounts "
                                 "volume 'scratch' at /tmp"),
        ("hadolint", "DL3007"),
    ]
    missing = [f"{what}: expected {text!r}" for what, text in expected if text not in report]
    if result.returncode != 1:
        missing.append(f"exit code {result.returncode}, expected 1")
    if missing:
        print("FAIL: scripts/validate_k8s.sh did not report:\n  " + "\n  ".join(missing))
        return 1
    print(f"PASS: all {len(expected)} injected defects reported, exit code 1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
