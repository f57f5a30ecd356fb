#!/usr/bin/env python3
"""`ringd launch --max-restarts` on an emulated StatefulSet (launcher_netns_test.py's cluster: 4
network namespaces as pods, each running `ringd agent`, pod 0 running launch):

  1. reference: `ringd train` (MLP on synthetic data, ringd's tcp transport, checkpoints every 10
     steps) through launch, uninterrupted;
  2. the same job with --max-restarts 3, its pods lost twice mid-training:
       a. pod 2 is deleted (SIGTERM to its agent, which passes it on to the orted and rank there;
          the agent is started again a second later, as the kubelet would),
       b. pod 3's node is lost (SIGKILL to every process in its namespace; started again later);
     after each, launch waits for the pods and runs the command again with --resume. The job must
     finish (exit 0, marker written) within a bound, with parameters bitwise those of step 1;
  3. a pod that never comes back: each --wait-timeout without it counts as a failed start, and
     once --max-restarts is spent launch exits 3 naming it;
  4. a count of starts left by earlier launches (pod 0 restarted) that spends the budget: exit 6;
     `ringd status` (the StatefulSet form's wait) says how each of these ended: it waits through
     the job of step 2 and exits 0 when it is done, 3 and 6 for steps 3 and 4, and 7 while
     nothing has ended;
  5. the Job form (k8s/components/indexed-job): agents named as an Indexed Job's pods
     (ringd-<i>-<random>, JOB_COMPLETION_INDEX=i); pod 0's agent, given --exit-with-launch, exits
     0 once the job trained (the Job's success policy then stops the others: SIGTERM, exit 0),
     and exits 1 when the job fails (what the pod failure policy turns into a Failed Job).

Needs root, `ip netns` and mpirun; skips (exit 77) otherwise. Every namespace, the bridge, the
hosts files and every process are removed on any exit.
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
import launcher_netns_test as netns
from harness import check
from train_test import write_dataset

STEPS = 600
JOB_BOUND_S = 240  # the restarted job must finish within this (two losses on a loaded 2-core box)


def pod_pids(i):
    done = subprocess.run(["ip", "netns", "pids", netns.namespace(i)], capture_output=True,
                          text=True)
    return [int(pid) for pid in done.stdout.split()]


def lose_pod(i):
    """A node lost: every process of pod i dies at once."""
    for pid in pod_pids(i):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process, log = CLUSTER.agents[i]
    process.wait()
    log.close()


def delete_pod(i):
    """A pod deleted: the kubelet sends its PID 1 (the agent) SIGTERM and waits for it."""
    process, log = CLUSTER.agents[i]
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=40)
    log.close()


def train_job(ringd, work, data, name, extra=()):
    return [ringd, "train", "--data", data, "--layers", "16,12,4", "--batch-size", "8", "--lr",
            "0.05", "--epochs", "100", "--max-steps", str(STEPS), "--log-every", "50",
            "--transport", "tcp", "--iface", "eth0", "--timeout", "20",
            "--checkpoint-dir", os.path.join(work, f"ckpt-{name}"), "--checkpoint-every", "10",
            "--json", os.path.join(work, f"{name}.json"), *extra]


def summary(work, name):
    with open(os.path.join(work, f"{name}.json")) as f:
        return json.load(f)


def wait_for_checkpoint(work, name, step, process, log, seconds=60):
    path = os.path.join(work, f"ckpt-{name}", f"ckpt-{step:010d}.ringd")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return
        if process.poll() is not None:
            break
        time.sleep(0.05)
    log.seek(0)
    raise harness.Failure(f"no checkpoint {path} within {seconds} s:\n{log.read()}")


def launch_log(log):
    log.flush()
    log.seek(0)
    return log.read()


def wait_for_launch(process, log, seconds, what):
    """launch's exit code and output once it ended within `seconds`; killed (and a failure
    naming `what`) otherwise."""
    try:
        code = process.wait(timeout=max(1, seconds))
    except subprocess.TimeoutExpired:
        raise harness.Failure(f"{what} within {seconds:.0f} s:\n{launch_log(log)}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return code, launch_log(log)


def test(ringd, args):
    if os.geteuid() != 0:
        netns.skip("not root: network namespaces need root")
    if shutil.which("ip") is None:
        netns.skip("no `ip` command (iproute2)")
    harness.require_mpirun()
    probe = subprocess.run(["ip", "netns", "add", f"ringd-e2e{netns.TAG}-probe"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        netns.skip(f"cannot create network namespaces here: {probe.stderr.strip()}")
    subprocess.run(["ip", "netns", "del", f"ringd-e2e{netns.TAG}-probe"], capture_output=True)

    global CLUSTER
    work = tempfile.mkdtemp(prefix="ringd-launch-restart-")
    CLUSTER = netns.Cluster(ringd, work)
    atexit.register(lambda: shutil.rmtree(work, ignore_errors=True))
    atexit.register(CLUSTER.teardown)
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, lambda *_: sys.exit(1))  # runs the atexit cleanup
    try:
        run_scenarios(ringd, work)
    finally:
        CLUSTER.teardown()


def run_scenarios(ringd, work):
    cluster = CLUSTER
    cluster.start()
    data = os.path.join(work, "data")
    os.makedirs(data)
    write_dataset(data)

    # 1. The reference: the same job, never interrupted.
    code, out, err, seconds = cluster.launch(
        ["--no-marker", "--", *train_job(ringd, work, data, "reference")], timeout=180)
    check(code == 0, f"reference launch exit {code}\nstdout:\n{out}\nstderr:\n{err}")
    reference = summary(work, "reference")
    check(reference["steps"] == STEPS and reference["ranks"] == netns.PODS, f"{reference}")
    print(f"ok   reference run: {STEPS} steps on {netns.PODS} pods in {seconds:.1f} s", flush=True)

    # 2. The job with restarts; 20 ms per step keeps it running long enough to be hit twice.
    # --sigkill-timeout 2: Open MPI winds a failed job down in about 2-4 times that.
    marker = os.path.join(work, "restart.done")
    job = train_job(ringd, work, data, "restarted", ["--throttle-ms", "20"])
    process, log = cluster.launch(["--marker", marker, "--max-restarts", "3", "--restart-delay",
                                   "1", "--sigkill-timeout", "2", "--", *job], timeout=0,
                                  background=True)
    started = time.monotonic()
    status = subprocess.Popen(cluster.in_pod(0, [ringd, "status", "--wait", "--marker", marker]),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=cluster.pod_env(0))
    try:
        # a. Pod 2 deleted after the step-50 checkpoint, back a second later.
        wait_for_checkpoint(work, "restarted", 50, process, log)
        delete_pod(2)
        time.sleep(1.0)
        cluster.start_agent(2)
        # b. Pod 3's node lost once the restarted run has written a later checkpoint.
        def restarts_seen(count):
            restarts = re.findall(r"^ringd launch: restart \d+ of 3", launch_log(log), re.M)
            return len(restarts) >= count
        deadline = time.monotonic() + 60
        while not restarts_seen(1) and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        check(restarts_seen(1), f"launch did not restart after pod 2 was deleted:\n"
                                f"{launch_log(log)}")
        # The stop's checkpoint may be of any step; the periodic ones are multiples of 10.
        newest = int(sorted(os.listdir(os.path.join(work, "ckpt-restarted")))[-1][5:15])
        wait_for_checkpoint(work, "restarted", (newest // 10 + 5) * 10, process, log)
        lose_pod(3)
        time.sleep(2.0)
        cluster.start_agent(3)
        code, text = wait_for_launch(process, log, JOB_BOUND_S - (time.monotonic() - started),
                                     "the job did not finish")
        seconds = time.monotonic() - started
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
    check(code == 0, f"launch exit {code} after two lost pods:\n{text}")
    check(len(re.findall(r"^ringd launch: restart \d+ of 3", text, re.M)) == 2,
          f"expected exactly two restarts:\n{text}")
    check(re.search(r"^ringd launch: the job finished after 2 restart\(s\)$", text, re.M),
          f"no closing line:\n{text}")
    check(text.count("--resume") >= 2, f"the restarts did not pass --resume:\n{text}")
    # Pod 2's deletion stopped every rank after one step, with a checkpoint of it; pod 3's loss
    # failed a step, and rank 0 wrote the checkpoint of the step before.
    stopped = re.search(r"^stopping after step (\d+) of \d+: (another rank was asked to stop|"
                        r"signal 15 \(SIGTERM\) here)$", text, re.M)
    failed = re.search(r"^step \d+ failed: writing a checkpoint of step (\d+) before exiting$",
                       text, re.M)
    check(stopped and failed, f"no graceful stop or no checkpoint after the failure:\n{text}")
    check(os.path.exists(marker) and not os.path.exists(marker + ".attempts"),
          "marker missing or attempts file left behind after success")
    try:
        status_out, _ = status.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        status.kill()
        raise harness.Failure("`ringd status --wait` still waiting 10 s after the job finished")
    check(status.returncode == 0 and status_out.startswith("done: "),
          f"ringd status --wait: exit {status.returncode}: {status_out}")
    resumed = summary(work, "restarted")
    check(resumed["start_step"] > 0 and resumed["steps"] == STEPS,
          f"the last run did not resume: {resumed}")
    check(resumed["params_sha256"] == reference["params_sha256"],
          f"parameters differ from the uninterrupted run: {resumed['params_sha256']} vs "
          f"{reference['params_sha256']}")
    print(f"ok   pod 2 deleted (all ranks stopped after step {stopped.group(1)}) and pod 3 lost "
          f"(checkpoint of step {failed.group(1)}) mid-training: 2 restarts, the last from step "
          f"{resumed['start_step']}; finished in {seconds:.1f} s with bitwise the uninterrupted "
          f"run's parameters", flush=True)

    # 3. A pod that never comes back: two waits of 6 s (--max-restarts 2), then launch names it.
    job = train_job(ringd, work, data, "lost", ["--throttle-ms", "20"])
    process, log = cluster.launch(["--marker", os.path.join(work, "lost.done"), "--max-restarts",
                                   "2", "--restart-delay", "0.5", "--sigkill-timeout", "2", "--",
                                   *job], timeout=0, background=True, wait_timeout=6)
    try:
        wait_for_checkpoint(work, "lost", 20, process, log)
        lost_at = time.monotonic()
        lose_pod(1)
        code, text = wait_for_launch(process, log, 90,
                                     "launch still waiting after pod 1 was lost for good")
        seconds = time.monotonic() - lost_at
    finally:
        log.close()
    check(code == 3, f"launch exit {code} with a pod gone for good (expected 3):\n{text}")
    check(re.search(r"1 of 4 pods not ready after", text) and netns.dns(1) in text,
          f"launch did not name {netns.dns(1)}:\n{text}")
    check(text.count("1 of 4 pods not ready after") == 2 and
          "giving up: the pods above did not come back, --max-restarts 2 spent" in text,
          f"launch did not wait once per restart before giving up:\n{text}")
    print(f"ok   pod 1 never came back: two waits of 6 s, then launch exit 3 after "
          f"{seconds:.1f} s naming {netns.dns(1)}", flush=True)
    code, out, _, _ = harness.run([ringd, "status", "--marker", os.path.join(work, "lost.done")],
                                  "ringd status", 30)
    check(code == 3 and out.startswith("failed (launch exit 3)"), f"status: exit {code}: {out}")

    # 4. Earlier launches (pod 0 restarting) spent the budget: refused at once, exit 6.
    cluster.start_agent(1)
    spent = os.path.join(work, "spent.done")
    with open(spent + ".attempts", "w") as f:
        f.write("4\n")
    code, out, err, seconds = cluster.launch(
        ["--marker", spent, "--max-restarts", "3", "--", *train_job(ringd, work, data, "spent")],
        timeout=30)
    check(code == 6 and "started 4 time(s) already and --max-restarts is 3" in err,
          f"launch with a spent budget: exit {code}\n{err}")
    check(not os.path.exists(os.path.join(work, "spent.json")), "the spent job ran")
    code, out, _, _ = harness.run([ringd, "status", "--marker", spent], "ringd status", 30)
    check(code == 6, f"status after a spent budget: exit {code}: {out}")
    code, out, _, seconds = harness.run(
        [ringd, "status", "--wait", "--timeout", "1", "--marker", os.path.join(work, "no.done")],
        "ringd status", 30)
    check(code == 7 and out.startswith("not finished"), f"status of nothing: exit {code}: {out}")
    print("ok   a budget spent by earlier launches: exit 6 at once, nothing started; ringd status "
          "said done (after waiting), 3, 6 and, for no job, 7", flush=True)

    # 5. The Job form: the agents as an Indexed Job's pods.
    def start_job_pods(command, marker):
        for i in range(netns.PODS):
            process, log = cluster.agents[i]
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=40)
            log.close()
        identity = lambda i: {"POD_NAME": f"ringd-{i}-x{i}q7z", "JOB_COMPLETION_INDEX": str(i)}
        for i in range(1, netns.PODS):
            cluster.start_agent(i, env=identity(i))
        cluster.start_agent(0, ["--exit-with-launch", "--", "--hostfile",
                                os.path.join(work, "hostfile"), "--marker", marker, "--iface",
                                "eth0", "--oversubscribed", "--wait-timeout", "20",
                                "--sigkill-timeout", "2", "--", *command], env=identity(0))

    def agent_exit(i, seconds):
        process, _ = cluster.agents[i]
        try:
            return process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            raise harness.Failure(f"agent {i} still running after {seconds} s:\n"
                                  f"{cluster.agent_log(i)}")

    done = os.path.join(work, "job-form.done")
    start_job_pods(train_job(ringd, work, data, "job-form"), done)
    code = agent_exit(0, 120)
    check(code == 0 and os.path.exists(done), f"pod 0's agent exited {code} (expected 0, with "
                                              f"the marker):\n{cluster.agent_log(0)}")
    check(summary(work, "job-form")["params_sha256"] == reference["params_sha256"],
          "the Job form trained to other parameters")
    for i in range(1, netns.PODS):  # the Job controller stops the rest once index 0 succeeded
        process, _ = cluster.agents[i]
        process.send_signal(signal.SIGTERM)
        check(agent_exit(i, 30) == 0, f"agent {i} did not exit 0 on SIGTERM:\n"
                                      f"{cluster.agent_log(i)}")
    print("ok   Job form: pod 0's agent exited 0 after training (the reference's parameters), "
          "the others 0 on SIGTERM", flush=True)

    failing = train_job(ringd, work, os.path.join(work, "no-such-data"), "job-form-failed")
    start_job_pods(failing, os.path.join(work, "job-form-failed.done"))
    code = agent_exit(0, 120)
    check(code == 1, f"pod 0's agent exited {code} for a failed job (expected 1: launch's "
                     f"code, which fails the Job):\n{cluster.agent_log(0)}")
    print("ok   Job form: a failing job makes pod 0's agent exit 1", flush=True)


CLUSTER = None

if __name__ == "__main__":
    harness.main(test)
