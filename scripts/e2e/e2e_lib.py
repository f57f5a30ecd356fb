#!/usr/bin/env python3
"""The real-cluster suite's judgements, kept out of bash so that tests/scripts/e2e_lib_test.py can
check them without a cluster:

  e2e_lib.py summary TRAIN_JSON          one line: steps, accuracy, samples/s, digest
  e2e_lib.py torch-summary JSON          the same for examples/pytorch/fashion_mnist.py --json
  e2e_lib.py restart REFERENCE RESTARTED  exit 0 when the restarted job resumed (start_step > 0)
                                          and ended with the reference's parameters, bitwise
  e2e_lib.py listeners IP0 IP1...         reads pod 0's log on stdin; exit 0 when every rank r
                                          says its tcp transport listens on pod r's address IPr
  e2e_lib.py peers POD_IP PEER_IP...      reads /proc/net/tcp text on stdin (pod 0's network
                                          namespace; several samples may follow each other);
                                          exit 0 when the job's connections ran from POD_IP to
                                          every other pod of the job and nowhere else
Each prints one line saying what it found (on failure: why).
"""
import json
import re
import socket
import struct
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def summary(train):
    acc = train.get("test_accuracy")
    acc_text = "none" if acc is None else f"{acc:.4f}"
    resumed = train.get("resumed_from") or ""
    return (
        f"{train['ranks']} ranks over {train['transport']} ({train['mode']} mode), steps "
        f"{train['start_step']}..{train['steps']}, test accuracy {acc_text}, "
        f"{train['samples_per_second']:.0f} samples/s, params_sha256 {train['params_sha256'][:16]}"
        + (f", resumed from {resumed}" if resumed else "")
    )


def torch_summary(result):
    epochs = result.get("epochs") or []
    if not epochs:
        return "no epoch finished"
    return (f"{result['ranks']} ranks ({result['framework']}), test accuracy "
            + ", ".join(f"{e['test_accuracy']:.4f}" for e in epochs)
            + f" after epochs 1..{len(epochs)}")


def restart(reference, restarted):
    """(ok, line): the restarted run resumed from a checkpoint and matches the reference bitwise."""
    for name, t in (("reference", reference), ("restarted", restarted)):
        if not t.get("params_sha256"):
            return False, f"the {name} run's train.json has no params_sha256"
    if reference["start_step"] != 0:
        return False, f"the reference run did not start at step 0 (start_step {reference['start_step']})"
    if restarted["start_step"] <= 0 or not restarted.get("resumed_from"):
        return False, (
            "the restarted job did not resume from a checkpoint (start_step "
            f"{restarted['start_step']}, resumed_from {restarted.get('resumed_from')!r}): the pod "
            "was lost before a checkpoint, or launch retrained from the start")
    if restarted["steps"] != reference["steps"]:
        return False, (f"the runs ended at different steps: reference {reference['steps']}, "
                       f"restarted {restarted['steps']}")
    if restarted["params_sha256"] != reference["params_sha256"]:
        return False, (
            f"the restarted job's parameters differ from the reference run's: params_sha256 "
            f"{restarted['params_sha256'][:16]} vs {reference['params_sha256'][:16]}")
    return True, (
        f"restart: job b resumed at step {restarted['start_step']} "
        f"({restarted['resumed_from']}) and ended at step {restarted['steps']} with job a's "
        f"parameters bitwise (params_sha256 {reference['params_sha256'][:16]})")


LISTENING = re.compile(r"rank (\d+): tcp transport listening on ([0-9.]+):(\d+)")


def listeners(log, pod_ips):
    """(ok, line): each rank r's tcp transport listened on pod r's own address (ranks map to the
    hostfile's pods in order, one slot each)."""
    seen = {}
    for m in LISTENING.finditer(log):
        seen.setdefault(int(m.group(1)), set()).add(m.group(2))
    if not seen:
        return False, "pod 0's log names no rank's listening address (RINGD_LOG_LEVEL=info?)"
    wrong = [f"rank {r} on {sorted(ips)}, pod {r} is {pod_ips[r] if r < len(pod_ips) else '?'}"
             for r, ips in sorted(seen.items()) if r >= len(pod_ips) or ips != {pod_ips[r]}]
    missing = [r for r in range(len(pod_ips)) if r not in seen]
    if wrong or missing:
        return False, ("ranks not on their pods' addresses: " + "; ".join(wrong)
                       + (f"; no address logged for ranks {missing}" if missing else ""))
    return True, (f"every rank's tcp transport listened on its own pod's address "
                  f"({', '.join(f'rank {r} {pod_ips[r]}' for r in range(len(pod_ips)))})")


def tcp_connections(text):
    """(local_ip, local_port, remote_ip, remote_port) of every ESTABLISHED IPv4 socket in
    /proc/net/tcp's text (or in several copies of it one after the other), each once."""
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[3] != "01":  # 01: TCP_ESTABLISHED
            continue
        ends = []
        for end in fields[1:3]:
            ip_hex, port_hex = end.split(":")
            ip = socket.inet_ntoa(struct.pack("<I", int(ip_hex, 16)))
            ends += [ip, int(port_hex, 16)]
        if tuple(ends) not in out:
            out.append(tuple(ends))
    return out


AGENT_HTTP_PORT = 29401


def peers(text, pod_ip, peer_ips):
    """(ok, line): pod 0's established connections go from its own eth0 address to the job's other
    pods (or to itself: rank 0 joins the store it serves by its own address; loopback, which Open
    MPI and the agent use inside the pod, is left aside), and reach every peer."""
    conns = tcp_connections(text)
    peer_set = set(peer_ips)
    # Left aside: loopback, and the agent's HTTP port (the kubelet's probes come from the node).
    external = [c for c in conns if not c[0].startswith("127.") and not c[2].startswith("127.")
                and c[1] != AGENT_HTTP_PORT]
    stray = [c for c in external if c[0] != pod_ip or c[2] not in peer_set | {pod_ip}]
    reached = sorted({c[2] for c in external if c[0] == pod_ip and c[2] in peer_set})
    if not external:
        return False, "pod 0 has no established connection to another pod (was the job running?)"
    if stray:
        c = stray[0]
        return False, (f"pod 0 has a connection {c[0]}:{c[1]} -> {c[2]}:{c[3]} that is not between "
                       f"the job's pods ({pod_ip} -> {sorted(peer_set)})")
    if reached != sorted(peer_set):
        return False, (f"pod 0 reaches only {reached} of its peers {sorted(peer_set)} over the pod "
                       "network")
    return True, (f"pod network: pod 0 ({pod_ip}, its eth0) held {len(external)} connections "
                  f"during the job, every one to itself or the job's other pods "
                  f"{sorted(peer_set)}")


def main(argv):
    if len(argv) == 3 and argv[1] in ("summary", "torch-summary"):
        print((summary if argv[1] == "summary" else torch_summary)(load(argv[2])))
        return 0
    if len(argv) == 4 and argv[1] == "restart":
        ok, line = restart(load(argv[2]), load(argv[3]))
    elif len(argv) >= 3 and argv[1] == "listeners":
        ok, line = listeners(sys.stdin.read(), argv[2:])
    elif len(argv) >= 4 and argv[1] == "peers":
        ok, line = peers(sys.stdin.read(), argv[2], argv[3:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
