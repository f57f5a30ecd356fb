#!/usr/bin/env python3
"""The real-cluster suite's own logic, without a cluster (scripts/e2e/, scripts/e2e_k8s.sh):

  * e2e_lib.py's judgements: a restarted job passes only when it resumed from a checkpoint and
    ended with the reference's parameters bitwise; pod 0's /proc/net/tcp passes only when its
    connections run from its own address to every other pod of the job (loopback ignored);
  * dns_feeder.sh turns the API's Endpoints (ready and not-ready, hostname or not) into the hosts
    records CoreDNS would serve, and signals dnsmasq only when they change;
  * runc_clamp.sh raises a negative oomScoreAdj to 0 in the bundle and leaves others alone;
  * make_e2e_overlay (report.sh): the e2e jobs' rendering differs from the bundled overlay's only
    by the names' prefix, imagePullPolicy, the resources, (cpu) the retention policy and the
    lost-pod jobs' --throttle-ms (no offline schema for v1.20 exists: the suite's server-side dry
    run is that check).

  e2e_scripts_test.py REPO_ROOT
"""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(sys.argv[1])
E2E = os.path.join(REPO, "scripts", "e2e")
sys.path.insert(0, E2E)
import e2e_lib  # noqa: E402

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def train(start, steps, sha, resumed=""):
    return {"ranks": 4, "transport": "tcp", "mode": "allreduce", "start_step": start,
            "steps": steps, "test_accuracy": 0.84, "samples_per_second": 900.0,
            "params_sha256": sha, "resumed_from": resumed}


def test_restart():
    ref = train(0, 468, "ab" * 32)
    ok, line = e2e_lib.restart(ref, train(400, 468, "ab" * 32, "ckpt-00000400.ringd"))
    check(ok and "step 400" in line, f"a resumed run with equal parameters passes: {line}")
    ok, line = e2e_lib.restart(ref, train(400, 468, "cd" * 32, "ckpt-00000400.ringd"))
    check(not ok and "differ" in line, f"different parameters fail: {line}")
    ok, line = e2e_lib.restart(ref, train(0, 468, "ab" * 32))
    check(not ok and "did not resume" in line, f"a run that trained from the start fails: {line}")
    ok, line = e2e_lib.restart(ref, train(400, 300, "ab" * 32, "x"))
    check(not ok and "different steps" in line, f"a run that stopped elsewhere fails: {line}")
    ok, line = e2e_lib.restart(ref, train(400, 468, "", "x"))
    check(not ok and "params_sha256" in line, f"a run without a digest fails: {line}")
    check("resumed from ckpt" in e2e_lib.summary(train(400, 468, "ab" * 32, "ckpt")),
          "the summary names the checkpoint a run resumed from")
    line = e2e_lib.torch_summary({"framework": "ringd", "ranks": 4, "epochs": [
        {"epoch": 1, "test_accuracy": 0.88}, {"epoch": 2, "test_accuracy": 0.9031}]})
    check(line == "4 ranks (ringd), test accuracy 0.8800, 0.9031 after epochs 1..2",
          f"the PyTorch example's summary: {line}")


def test_listeners():
    ips = ["10.213.0.5", "10.213.0.2", "10.213.0.3"]
    log = "".join(f"[ringd r{r} I 2026 pod-{r} 15] rank {r}: tcp transport listening on {ip}:4{r}\n"
                  for r, ip in enumerate(ips))
    ok, line = e2e_lib.listeners("ringd launch: mpirun ...\n" + log, ips)
    check(ok and "rank 2 10.213.0.3" in line, f"every rank on its pod's address passes: {line}")
    ok, line = e2e_lib.listeners(log.replace("10.213.0.2", "192.0.2.2"), ips)
    check(not ok and "rank 1 on ['192.0.2.2']" in line, f"a rank on another address fails: {line}")
    ok, line = e2e_lib.listeners(log.split("\n", 1)[1], ips)
    check(not ok and "ranks [0]" in line, f"a rank that logged no address fails: {line}")
    ok, line = e2e_lib.listeners("nothing\n", ips)
    check(not ok and "names no rank" in line, f"a log without addresses fails: {line}")


def hexaddr(ip, port):
    return "%08X:%04X" % (struct.unpack("<I", socket.inet_aton(ip))[0], port)


def proc_net_tcp(conns):
    lines = ["  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid"]
    for i, (lip, lport, rip, rport, state) in enumerate(conns):
        lines.append(f"   {i}: {hexaddr(lip, lport)} {hexaddr(rip, rport)} {state} 0:0 00:0 0 10001")
    return "\n".join(lines) + "\n"


def test_peers():
    pod, others = "10.213.0.5", ["10.213.0.6", "10.213.0.7", "10.213.0.8"]
    good = [(pod, 40000 + i, ip, 29402, "01") for i, ip in enumerate(others)]
    good += [("127.0.0.1", 5000, "127.0.0.1", 5001, "01"), (pod, 29400, "0.0.0.0", 0, "0A")]
    ok, line = e2e_lib.peers(proc_net_tcp(good), pod, others)
    check(ok and "3 connections" in line, f"connections to every peer pass: {line}")
    ok, line = e2e_lib.peers(proc_net_tcp(good + [(pod, 5, pod, 6, "01")]), pod, others)
    check(ok and "4 connections" in line, f"a connection to the pod's own address passes: {line}")
    probe = (pod, 29401, "10.213.0.1", 40000, "01")
    ok, line = e2e_lib.peers(proc_net_tcp(good + [probe]), pod, others)
    check(ok and "3 connections" in line, f"the kubelet's probes of the agent are left aside: {line}")
    # Samples taken one after the other: each connection counted once, and a peer seen in any
    # sample counts (the job connects and ends between samples).
    samples = proc_net_tcp(good[:2]) + proc_net_tcp(good[:1]) + proc_net_tcp(good[1:])
    ok, line = e2e_lib.peers(samples, pod, others)
    check(ok and "3 connections" in line, f"several samples are read as one: {line}")
    ok, line = e2e_lib.peers(proc_net_tcp(good[1:]), pod, others)
    check(not ok and "reaches only" in line, f"a peer never reached fails: {line}")
    ok, line = e2e_lib.peers(proc_net_tcp(good + [("192.0.2.9", 1, others[0], 2, "01")]), pod, others)
    check(not ok and "not between" in line, f"a connection from another address fails: {line}")
    ok, line = e2e_lib.peers(proc_net_tcp(good[3:]), pod, others)
    check(not ok and "no established" in line, f"no connection at all fails: {line}")


def write_exe(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)


def test_dns_feeder(work):
    endpoints = {"items": [
        {"metadata": {"namespace": "ns1", "name": "job1-ringd"},
         "subsets": [{"addresses": [{"ip": "10.0.0.2", "hostname": "job1-ringd-0"}],
                      "notReadyAddresses": [{"ip": "10.0.0.3", "hostname": "job1-ringd-1"}]}]},
        {"metadata": {"namespace": "ns1", "name": "plain"},
         "subsets": [{"addresses": [{"ip": "10.0.0.9"}]}]},
        {"metadata": {"namespace": "kube-system", "name": "empty"}},
    ]}
    with open(os.path.join(work, "endpoints.json"), "w") as f:
        json.dump(endpoints, f)
    kubectl = os.path.join(work, "kubectl")
    write_exe(kubectl, f"#!/bin/sh\ncat {work}/endpoints.json\n")
    # A stand-in for dnsmasq: counts its SIGHUPs.
    hups = os.path.join(work, "hups")
    dnsmasq = subprocess.Popen(
        ["bash", "-c", f"trap 'echo >> {hups}' HUP; while :; do sleep 0.1; done"])
    time.sleep(0.5)  # its trap set before the first signal
    pidfile = os.path.join(work, "dnsmasq.pid")
    with open(pidfile, "w") as f:
        f.write(str(dnsmasq.pid))
    hosts = os.path.join(work, "hosts")
    feeder = subprocess.Popen([os.path.join(E2E, "dns_feeder.sh"), kubectl, "/dev/null", hosts,
                               pidfile, "cluster.local"])
    try:
        time.sleep(3.5)  # three or four rounds, one change
        with open(hosts) as f:
            records = set(f.read().split("\n")) - {""}
        want = {"10.0.0.2 job1-ringd.ns1.svc.cluster.local",
                "10.0.0.3 job1-ringd.ns1.svc.cluster.local",
                "10.0.0.2 job1-ringd-0.job1-ringd.ns1.svc.cluster.local",
                "10.0.0.3 job1-ringd-1.job1-ringd.ns1.svc.cluster.local",
                "10.0.0.9 plain.ns1.svc.cluster.local"}
        check(records == want, f"dns_feeder's records, not-ready pods included: {sorted(records)}")
        count = open(hups).read().count("\n") if os.path.exists(hups) else 0
        check(count == 1, f"dnsmasq is signalled once for one change over several rounds ({count})")
    finally:
        feeder.kill()
        dnsmasq.kill()
        feeder.wait()
        dnsmasq.wait()


def test_runc_clamp(work):
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir)
    write_exe(os.path.join(bindir, "runc"), f"#!/bin/sh\necho \"$@\" > {work}/runc-args\n")
    env = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"])
    for adj, want in ((-998, 0), (500, 500), (None, None)):
        bundle = os.path.join(work, f"bundle{adj}")
        os.makedirs(bundle)
        config = {"process": {"args": ["/pause"]}}
        if adj is not None:
            config["process"]["oomScoreAdj"] = adj
        with open(os.path.join(bundle, "config.json"), "w") as f:
            json.dump(config, f)
        done = subprocess.run([os.path.join(E2E, "runc_clamp.sh"), "--root", "/r", "create",
                               "--bundle", bundle, "id1"], env=env, capture_output=True, text=True)
        got = json.load(open(os.path.join(bundle, "config.json")))["process"].get("oomScoreAdj")
        args = open(os.path.join(work, "runc-args")).read().strip()
        check(done.returncode == 0 and got == want and args.endswith(f"--bundle {bundle} id1"),
              f"runc_clamp: oomScoreAdj {adj} -> {got} (want {want}), runc called with its arguments")


def test_overlays(work):
    subprocess.run([os.path.join(REPO, "scripts", "validate_k8s.sh"), "--install-only"],
                   check=True, cwd=REPO)
    venv = os.path.join(REPO, "build-tools", "k8s-venv", "bin")
    tree = os.path.join(work, "k8s")
    shutil.copytree(os.path.join(REPO, "k8s"), tree)
    with open(os.path.join(tree, "base", "job-secret"), "w") as f:
        f.write("e2e-scripts-test-placeholder\n")
    script = (f"source {E2E}/lib.sh; source {E2E}/report.sh; "
              f"make_e2e_overlay {tree} a cpu e2e-a- retention 20; "
              f"make_e2e_overlay {tree} ps ps e2e-ps-; make_e2e_overlay {tree} pt pytorch e2e-pt-; "
              f"make_e2e_overlay {tree} tf tensorflow e2e-tf-")
    subprocess.run(["bash", "-c", script], check=True)
    py = os.path.join(venv, "python")
    for name, overlay, throttle in (("a", "cpu", "20"), ("ps", "ps", ""), ("pt", "pytorch", ""),
                                    ("tf", "tensorflow", "")):
        e2e = subprocess.run([os.path.join(venv, "kubectl"), "kustomize",
                              os.path.join(tree, "e2e", name)], capture_output=True, text=True)
        bundled = subprocess.run([os.path.join(venv, "kubectl"), "kustomize",
                                  os.path.join(tree, "overlays", overlay)],
                                 capture_output=True, text=True)
        check(e2e.returncode == 0 and bundled.returncode == 0,
              f"the e2e {overlay} overlay renders: {e2e.stderr.strip()[:300]}")
        if e2e.returncode:
            continue
        # Compare in the venv's python (it has PyYAML).
        compare = subprocess.run([py, "-c", COMPARE, e2e.stdout, bundled.stdout, f"e2e-{name}-",
                                  throttle], capture_output=True, text=True)
        check(compare.returncode == 0,
              f"the e2e {overlay} overlay changes only what it says: {compare.stdout}{compare.stderr}")


# The e2e rendering, with the prefix taken off the names and the allowed differences put back,
# must equal the bundled rendering.
COMPARE = r'''
import sys, yaml
e2e, bundled, prefix = list(yaml.safe_load_all(sys.argv[1])), list(yaml.safe_load_all(sys.argv[2])), sys.argv[3]
def unprefix(x):
    if isinstance(x, dict): return {k: unprefix(v) for k, v in x.items()}
    if isinstance(x, list): return [unprefix(v) for v in x]
    if isinstance(x, str) and prefix in x: return x.replace(prefix, "")
    return x
e2e = [unprefix(d) for d in e2e]
seen = 0
for d in e2e:
    if d["kind"] == "StatefulSet":
        c = d["spec"]["template"]["spec"]["containers"][0]
        assert c.pop("imagePullPolicy") == "Never", "imagePullPolicy"
        assert c.pop("resources")["requests"]["cpu"] == "100m", "resources"
        if sys.argv[4]:  # the lost-pod jobs' --throttle-ms, at the end of the command
            assert c["args"][-2:] == ["--throttle-ms", sys.argv[4]], c["args"][-2:]
            del c["args"][-2:]
        seen += 1
for d in bundled:
    if d["kind"] == "StatefulSet":
        c = d["spec"]["template"]["spec"]["containers"][0]
        c.pop("imagePullPolicy"); c.pop("resources")
        d["spec"].pop("persistentVolumeClaimRetentionPolicy", None)
# Generated names carry a content hash that the secret and the prefix change.
def key(d): return (d["kind"], d["metadata"]["name"].rsplit("-", 1)[0] if d["kind"] in ("ConfigMap", "Secret") else d["metadata"]["name"])
a = {key(d): d for d in e2e}
b = {key(d): d for d in bundled}
assert a.keys() == b.keys(), f"objects differ: {sorted(a)} vs {sorted(b)}"
for k in a:
    if k[0] in ("ConfigMap", "Secret"): continue
    ta, tb = yaml.safe_dump(a[k]), yaml.safe_dump(b[k])
    import re
    ta, tb = (re.sub(r"(ringd-job(?:-secret)?)-[a-z0-9]{10}", r"\1", t) for t in (ta, tb))
    assert ta == tb, f"{k} differs:\n{ta}\n---\n{tb}"
assert seen >= 1
print(f"{len(a)} objects, {seen} StatefulSet(s) patched")
'''


def main():
    work = tempfile.mkdtemp(prefix="ringd-e2e-scripts-")
    try:
        test_restart()
        test_peers()
        test_listeners()
        if shutil.which("jq"):
            test_dns_feeder(work)
            test_runc_clamp(work)
        else:
            check(False, "jq is installed (scripts/install_deps.sh installs it)")
        test_overlays(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
