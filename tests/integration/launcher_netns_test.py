#!/usr/bin/env python3
"""A StatefulSet of 4 pods emulated on this machine: 4 network namespaces on a private bridge
(bench/cluster.sh, with names and a subnet of this test's own), each with a hosts file under
/etc/netns/<namespace>/ that gives the pods their DNS names (ringd-<i>.ringd.default.svc.
cluster.local), each running `ringd agent`. In "pod 0":

  1. `ringd launch` waits for the 4 agents, writes the hostfile, runs mpirun with
     plm_rsh_agent "ringd exec" (no ssh anywhere), and a short `ringd train` (MLP on train_test.py's
     synthetic data) completes on 4 ranks; the completion marker is written; /metrics of a remote
     agent counts the started orted; then a `ringd bench --check` (no marker) whose rank 0 figures
     pod 0's /metrics shows (RINGD_METRICS_FILE);
  2. `ringd launch` again finds the marker and does not run mpirun;
  3. a longer job is started and one pod's agent (ringd-2) is killed mid-run: launch fails within
     the bound with a message naming ringd-2;
  4. `ringd hostfile` then gives up after its --wait-timeout, listing ringd-2 (exit 3);
  5. as in the manifests, pod 0's agent runs launch from the words after its "--" and keeps serving,
     with launch's exit code in its /metrics;
  6. a PyTorch job, as k8s/overlays/pytorch runs one: `ringd launch -- python -c ...` where every
     rank opens the job with ringd.torch (RINGD_TRANSPORT=tcp, RINGD_IFACE=eth0, forwarded by
     launch) and allreduces its rank + 1 (skipped when the Python package was not built).

Needs root, `ip netns` and mpirun; skips (exit 77) saying which is missing. Every namespace, the
bridge, the hosts files and every process are removed on any exit.
"""
import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import harness
from harness import check
from train_test import write_dataset  # the synthetic IDX data set train_test.py trains on

PODS = 4
SECRET = "launcher-netns-test-secret"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER_SH = os.path.join(REPO, "bench", "cluster.sh")
FAIL_BOUND_S = 40  # launch must fail this soon after the agent dies

TAG = os.getpid() % 100000
NAMES = {
    "RINGD_CLUSTER_NODE_PREFIX": f"ringd-e2e{TAG}-",
    "RINGD_CLUSTER_PORT_PREFIX": f"re{TAG}v",
    "RINGD_CLUSTER_BRIDGE": f"re{TAG}br",
    "RINGD_CLUSTER_SUBNET": f"10.{200 + TAG % 50}.{TAG % 250}",
}


def namespace(i):
    return NAMES["RINGD_CLUSTER_NODE_PREFIX"] + str(i)


def address(i):
    return f"{NAMES['RINGD_CLUSTER_SUBNET']}.{i + 1}"


def dns(i):
    return f"ringd-{i}.ringd.default.svc.cluster.local"


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(harness.SKIP)


class Cluster:
    def __init__(self, ringd, work):
        self.ringd = ringd
        self.work = work
        self.env = dict(os.environ, **NAMES, RINGD_NETNS_TMPDIR=os.path.join(work, "netns"))
        self.agents = {}
        self.up = False

    def cluster(self, *args, check_rc=True):
        done = subprocess.run([CLUSTER_SH, *args], env=self.env, capture_output=True, text=True,
                              timeout=60)
        if check_rc and done.returncode != 0:
            raise harness.Failure(f"cluster.sh {' '.join(args)}: {done.stderr}")
        return done

    def start(self):
        self.up = True
        self.cluster("up", str(PODS), "10gbit")
        for i in range(PODS):
            directory = f"/etc/netns/{namespace(i)}"
            os.makedirs(directory, exist_ok=True)
            # As on Kubernetes: the kubelet's /etc/hosts names the pod itself (its FQDN and short
            # name); the peers resolve by their FQDN only (the cluster DNS), so a short peer name
            # fails here as it does on a real cluster.
            with open(os.path.join(directory, "hosts"), "w") as hosts:
                hosts.write("127.0.0.1 localhost\n")
                for j in range(PODS):
                    hosts.write(f"{address(j)} {dns(j)}" + (f" ringd-{j}\n" if j == i else "\n"))
        for i in range(PODS):
            self.start_agent(i)

    def pod_env(self, i, **extra):
        tmpdir = os.path.join(self.work, "netns", namespace(i))
        os.makedirs(tmpdir, exist_ok=True)
        values = dict(RINGD_JOB_SECRET=SECRET, POD_NAME=f"ringd-{i}", RINGD_REPLICAS=PODS,
                      TMPDIR=tmpdir,
                      RINGD_METRICS_FILE=os.path.join(self.work, f"metrics{i}.prom"),
                      OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
        env = harness.environment(**{**values, **extra})
        env.pop("RINGD_JOB_SECRET_FILE", None)
        return env

    def in_pod(self, i, command):
        return ["ip", "netns", "exec", namespace(i), *command]

    def start_agent(self, i, extra=(), env=None):
        log = open(os.path.join(self.work, f"agent{i}.log"), "w+")
        process = subprocess.Popen(
            self.in_pod(i, [self.ringd, "agent", *extra]),
            stdout=log, stderr=subprocess.STDOUT, env=self.pod_env(i, **(env or {})),
            start_new_session=True)
        self.agents[i] = (process, log)

    def agent_log(self, i):
        _, log = self.agents[i]
        log.flush()
        with open(log.name) as f:
            return f.read()

    def http_get(self, i, path):
        """GET http://<pod i>:29401<path> from inside pod 0's namespace."""
        code = ("import sys, urllib.request; "
                f"r = urllib.request.urlopen('http://{dns(i)}:29401{path}', timeout=5); "
                "sys.stdout.write(r.read().decode())")
        done = subprocess.run(self.in_pod(0, [sys.executable, "-c", code]), capture_output=True,
                              text=True, timeout=20)
        check(done.returncode == 0, f"GET {path} from {dns(i)} failed: {done.stderr}")
        return done.stdout

    def launch(self, args, timeout, background=False, wait_timeout=20, env=None):
        command = self.in_pod(0, [self.ringd, "launch", "--hostfile",
                                  os.path.join(self.work, "hostfile"), "--iface", "eth0",
                                  "--oversubscribed", "--wait-timeout", str(wait_timeout), *args])
        env = self.pod_env(0, **(env or {}))
        if background:
            out = open(os.path.join(self.work, "launch-bg.log"), "w+")
            return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True), out
        return harness.run(command, "ringd launch", timeout, env=env)

    def teardown(self):
        for process, log in self.agents.values():
            if log.closed:
                continue
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            log.close()
        if self.up:
            self.cluster("down", str(PODS), check_rc=False)  # also kills what is left inside
            for i in range(PODS):
                shutil.rmtree(f"/etc/netns/{namespace(i)}", ignore_errors=True)
            self.up = False


def wait_until(condition, seconds, what, explain=lambda: ""):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise harness.Failure(f"{what} not within {seconds} s\n{explain()}")


def test(ringd, args):
    if os.geteuid() != 0:
        skip("not root: network namespaces need root")
    if shutil.which("ip") is None:
        skip("no `ip` command (iproute2)")
    harness.require_mpirun()
    probe = subprocess.run(["ip", "netns", "add", f"ringd-e2e{TAG}-probe"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        skip(f"cannot create network namespaces here: {probe.stderr.strip()}")
    subprocess.run(["ip", "netns", "del", f"ringd-e2e{TAG}-probe"], capture_output=True)

    work = tempfile.mkdtemp(prefix="ringd-launch-e2e-")
    cluster = Cluster(ringd, work)
    atexit.register(lambda: shutil.rmtree(work, ignore_errors=True))
    atexit.register(cluster.teardown)
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, lambda *_: sys.exit(1))  # runs the atexit cleanup
    try:
        run_scenarios(cluster, ringd, work)
    finally:
        cluster.teardown()


def run_scenarios(cluster, ringd, work):
    cluster.start()
    marker = os.path.join(work, "launch.done")

    # 1. A short `ringd train` through mpirun and `ringd exec`, no ssh.
    data = os.path.join(work, "data")
    os.makedirs(data)
    write_dataset(data)
    summary = os.path.join(work, "train.json")
    job = [ringd, "train", "--data", data, "--layers", "16,12,4", "--batch-size", "8", "--lr",
           "0.05", "--epochs", "1", "--max-steps", "20", "--timeout", "30", "--json", summary]
    code, out, err, seconds = cluster.launch(["--marker", marker, "--", *job], timeout=120)
    check(code == 0, f"launch exit {code} ({seconds:.1f} s)\nstdout:\n{out}\nstderr:\n{err}\n"
                     + "\n".join(f"agent {i}:\n{cluster.agent_log(i)}" for i in range(PODS)))
    check(re.search(r"^trained \S+ \(allreduce mode, 4 ranks over mpi", out, re.M) is not None,
          f"no training summary for 4 ranks:\n{out}")
    with open(summary) as f:
        result = json.load(f)
    check(result["ranks"] == PODS and result["steps"] == 20, f"train --json: {result}")
    check("plm_rsh_agent" in err and f"{ringd} exec" in err, f"mpirun line not shown:\n{err}")
    check(os.path.exists(marker), "no completion marker after a successful run")
    with open(marker) as f:
        record = f.read()
    check('"pods":4' in record, f"marker: {record}")
    with open(os.path.join(work, "hostfile")) as f:
        hostfile = f.read()
    check(hostfile == "".join(f"{dns(i)} slots=1\n" for i in range(PODS)), f"hostfile:\n{hostfile}")
    metrics = cluster.http_get(2, "/metrics")
    started = re.search(r'^ringd_exec_started_total\{pod="ringd-2"\} (\d+)$', metrics, re.M)
    check(started is not None and int(started.group(1)) >= 1,
          f"ringd-2's agent did not count the orted it started:\n{metrics}")
    check(cluster.http_get(1, "/healthz") == "ok\n", "healthz")
    print(f"ok   ringd train through ringd exec on {PODS} pods in {seconds:.1f} s "
          f"(test accuracy {result['test_accuracy']}); marker {record.strip()}")

    # 1b. A benchmark (no marker): rank 0 reports through RINGD_METRICS_FILE to pod 0's agent.
    bench = [ringd, "bench", "allreduce", "-b", "4K", "-e", "256K", "--iters", "3", "--check"]
    code, out, err, seconds = cluster.launch(["--no-marker", "--", *bench], timeout=120)
    check(code == 0, f"bench launch exit {code}\nstdout:\n{out}\nstderr:\n{err}")
    harness.check_bench_output("launch", out, harness.sweep_rows(4096, 256 << 10, 4))
    metrics = cluster.http_get(0, "/metrics")
    for name in ("ringd_bench_busbw_bytes_per_second", "ringd_bench_bytes_total"):
        check(re.search(r"^" + name + r"\{[^}]*ranks=\"4\"\} [0-9.e+]+$", metrics, re.M),
              f"pod 0's /metrics lacks {name}:\n{metrics}")
    check(re.search(r"^ringd_bench_wrong_total\{[^}]*\} 0$", metrics, re.M),
          f"pod 0's /metrics: wrong values or no count:\n{metrics}")
    print(f"ok   ringd bench --check through launch in {seconds:.1f} s; pod 0's /metrics has it")

    # 2. A restarted pod 0 finds the marker and does not train again.
    code, out, err, seconds = cluster.launch(["--marker", marker, "--", *job], timeout=30)
    check(code == 0, f"second launch exit {code}:\n{out}\n{err}")
    check("already finished" in out and "not training again" in out, f"second launch:\n{out}")
    check("trained" not in out and "plm_rsh_agent" not in err,
          f"second launch ran mpirun:\n{out}\n{err}")
    print(f"ok   second launch found the marker and did not retrain ({seconds:.1f} s)")

    # 3. An agent dies mid-run: launch fails in time, naming that pod.
    long_job = [ringd, "bench", "allreduce", "-b", "1M", "-e", "1M", "--iters", "100000",
                "--warmup", "0", "--timeout", "10"]
    process, log = cluster.launch(["--marker", os.path.join(work, "second.done"), "--",
                                   *long_job], timeout=0, background=True)
    try:
        def orted_running():
            text = cluster.http_get(2, "/metrics")
            return re.search(r'^ringd_exec_running\{pod="ringd-2"\} 1$', text, re.M) is not None
        wait_until(orted_running, 30, "an orted running on ringd-2")
        time.sleep(1.0)  # let the ranks start exchanging data
        killed_at = time.monotonic()
        agent, _ = cluster.agents[2]
        os.killpg(agent.pid, signal.SIGKILL)
        try:
            code = process.wait(timeout=FAIL_BOUND_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            log.seek(0)
            raise harness.Failure(f"launch still running {FAIL_BOUND_S} s after ringd-2's agent "
                                  f"died:\n{log.read()}")
        seconds = time.monotonic() - killed_at
        log.seek(0)
        text = log.read()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
    check(code == 1, f"launch exit {code} after an agent died (expected 1):\n{text}")
    check(re.search(r"pod " + re.escape(dns(2)) + r": its agent does not answer", text)
          is not None, f"launch did not name ringd-2:\n{text}")
    check(not os.path.exists(os.path.join(work, "second.done")), "marker written for a failed job")
    print(f"ok   agent ringd-2 killed: launch failed {seconds:.1f} s later naming {dns(2)}")

    # 4. With ringd-2's agent gone, `ringd hostfile` gives up after its bound and names it.
    command = cluster.in_pod(0, [ringd, "hostfile", "--hostfile", os.path.join(work, "hf"),
                                 "--wait-timeout", "1.5"])
    code, out, err, seconds = harness.run(command, "ringd hostfile", 30, env=cluster.pod_env(0))
    check(code == 3, f"hostfile exit {code} with a pod missing (expected 3):\n{out}\n{err}")
    check(f"1 of {PODS} pods not ready" in err and dns(2) in err and dns(1) not in err,
          f"hostfile did not list exactly ringd-2:\n{err}")
    check(seconds < 10, f"hostfile took {seconds:.1f} s with --wait-timeout 1.5")
    check(not os.path.exists(os.path.join(work, "hf")), "hostfile written although a pod is missing")
    print(f"ok   ringd hostfile gave up after {seconds:.1f} s naming {dns(2)}")

    # 5. As in the manifests: pod 2 restarts, and pod 0's agent runs launch itself (the words
    # after "--"), keeps serving afterwards and reports launch's exit code in /metrics.
    cluster.start_agent(2)
    agent0, _ = cluster.agents[0]
    os.killpg(agent0.pid, signal.SIGKILL)
    agent0.wait()
    cluster.start_agent(0, ["--", "--hostfile", os.path.join(work, "hostfile"), "--marker",
                            os.path.join(work, "agent.done"), "--iface", "eth0",
                            "--oversubscribed", "--", ringd, "bench", "allreduce", "-b", "4K",
                            "-e", "4K", "--iters", "2", "--check"])

    def launch_ended():
        try:
            text = cluster.http_get(0, "/metrics")
        except harness.Failure:  # the restarted agent may not listen yet (slow under ASan)
            return False
        return re.search(r'^ringd_launch_running\{pod="ringd-0"\} 0$', text, re.M) is not None
    def agents_state():
        logs = "\n".join(f"agent {i}:\n{cluster.agent_log(i)}" for i in range(PODS))
        processes = subprocess.run(["ps", "-eo", "pid,ppid,pgid,etimes,args"], capture_output=True,
                                   text=True).stdout
        ringd_lines = "\n".join(line for line in processes.splitlines() if "ringd" in line)
        return f"{logs}\npod 0's /metrics:\n{cluster.http_get(0, '/metrics')}\n{ringd_lines}"
    wait_until(launch_ended, 60, "pod 0's agent reporting that its launch ended", agents_state)
    metrics = cluster.http_get(0, "/metrics")
    log = cluster.agent_log(0)
    check(re.search(r'^ringd_launch_exit_code\{pod="ringd-0"\} 0$', metrics, re.M) is not None,
          f"launch run by the agent failed:\n{metrics}\n{log}")
    check(os.path.exists(os.path.join(work, "agent.done")) and "serving on" in log,
          f"agent 0 after its launch:\n{log}")
    check(cluster.http_get(0, "/healthz") == "ok\n", "agent 0 stopped serving after launch")
    print("ok   pod 0's agent ran launch from its own arguments and serves on (exit code 0)")

    pytorch_job(cluster, ringd)


PYTORCH_RANK = """
import sys
sys.path.insert(0, {package!r})
import torch
import ringd.torch as hvd
hvd.init()
value = torch.tensor([float(hvd.rank() + 1)])
hvd.allreduce_(value, op=hvd.Sum)
# One write per line: mpirun forwards the ranks' output as it reads it, and two writes of one
# print (text, then newline) can interleave with another rank's.
sys.stdout.write(f"rank {{hvd.rank()}} of {{hvd.size()}} over {{hvd.local_size()}} local: "
                 f"sum {{value.item():.0f}}\\n")
sys.stdout.flush()
hvd.shutdown()
"""


def pytorch_job(cluster, ringd):
    """6. `ringd launch -- python ...` with ringd.torch on every pod (k8s/overlays/pytorch)."""
    python = os.path.join(REPO, "build-tools", "python-venv", "bin", "python")
    package = os.path.join(os.path.dirname(os.path.dirname(ringd)), "python")
    if not (os.access(python, os.X_OK) and os.path.isdir(os.path.join(package, "ringd"))):
        print(f"skip a PyTorch job through launch: no {python} or no {package}/ringd (the Python "
              "package is built by scripts/test.sh unless RINGD_SKIP_PYTHON=1)", flush=True)
        return
    code, out, err, seconds = cluster.launch(
        ["--no-marker", "--", python, "-c", PYTORCH_RANK.format(package=package)], timeout=180,
        env={"RINGD_TRANSPORT": "tcp", "RINGD_IFACE": "eth0"})
    check(code == 0, f"PyTorch job through launch: exit {code}\nstdout:\n{out}\nstderr:\n{err}")
    lines = sorted(re.findall(r"rank \d of 4 over 1 local: sum 10", out))
    check(lines == [f"rank {i} of 4 over 1 local: sum 10" for i in range(PODS)],
          f"every rank must print the sum 1+2+3+4:\n{out}\n{err}")
    print(f"ok   a PyTorch job (ringd.torch over tcp on eth0) through launch on {PODS} pods in "
          f"{seconds:.1f} s: every rank allreduced to 10", flush=True)


if __name__ == "__main__":
    harness.main(test)
