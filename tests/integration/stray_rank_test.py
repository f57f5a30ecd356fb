#!/usr/bin/env python3
"""Issue 15, items 1 and 9, with real processes on one --rendezvous.

(a) A stray: a process started with the job's --rendezvous and --size that claims rank 1 before
the real rank 1 starts. The job forms with the stray; when the real rank 1 starts it is refused
naming the stray's claim, and every rank of the running job (the stray included) fails naming the
two claims (before: all four exited 0 having averaged the stray's data; the real rank 1 failed).
(b) 200 silent connections held open (re-dialed when closed) to rank 0's rendezvous port before
ranks 1..3 start: the job still completes, and rank 0's log stays short.
(c) Issue 35, item 5: a process of another job (another RINGD_JOB_ID, the same secret, address and
size) claims rank 1 first: it is refused at once naming both jobs, and the job completes with its
own rank 1 and correct results (before: the stranger became rank 1 and the job failed when its real
rank 1 came). A job that nothing identifies (no launcher id, no secret) says so at start."""
import select
import socket
import subprocess
import time

import harness
from harness import check

BENCH = ["bench", "allreduce", "--check", "-b", "1M", "-e", "64M", "-f", "2", "--iters", "20",
         "--warmup", "1", "--timeout", "20"]


def start(ringd, rank, size, port, directory, name, env=None):
    out = open(f"{directory}/{name}.out", "w+")
    err = open(f"{directory}/{name}.err", "w+")
    command = [ringd, *BENCH, "--rank", str(rank), "--size", str(size), "--rendezvous",
               f"127.0.0.1:{port}"]
    return subprocess.Popen(command, stdout=out, stderr=err,
                            env=env or harness.environment()), err


def read(err):
    err.flush()
    with open(err.name) as f:
        return f.read()


def wait_all(processes, timeout=60):
    """Exit codes by name; whatever is still running after `timeout` s is killed."""
    try:
        return {name: p.wait(timeout=timeout) for name, (p, _) in processes.items()}
    finally:
        for p, _ in processes.values():
            if p.poll() is None:
                p.kill()


def wait_listening(port, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise harness.Failure(f"nothing listens on {port}")


def stray(ringd):
    port = harness.free_port()
    directory = harness.work_dir("ringd-stray-")
    processes = {"rank0": start(ringd, 0, 4, port, directory, "rank0")}
    wait_listening(port)
    processes["stray"] = start(ringd, 1, 4, port, directory, "stray")
    time.sleep(0.5)  # the stray claims rank 1 first (the scenario, not synchronisation)
    for rank in (2, 3):
        processes[f"rank{rank}"] = start(ringd, rank, 4, port, directory, f"rank{rank}")
    deadline = time.monotonic() + 20
    while "#wrong" not in open(f"{directory}/rank0.out").read():
        check(time.monotonic() < deadline, f"the job did not form: {read(processes['rank0'][1])}")
        time.sleep(0.05)
    processes["real1"] = start(ringd, 1, 4, port, directory, "real1")
    codes = wait_all(processes)
    logs = {name: read(err) for name, (_, err) in processes.items()}
    check(codes["real1"] != 0 and "was already claimed by pid" in logs["real1"],
          f"the real rank 1: exit {codes['real1']}: {logs['real1']}")
    for name in ("rank0", "stray", "rank2", "rank3"):
        check(codes[name] != 0, f"{name} exited 0 beside a stray rank: {logs[name]}")
        check("claimed by two processes" in logs[name] or "was claimed twice" in logs[name],
              f"{name} does not name the two claims: {logs[name]}")
    print("ok   stray rank 1: the real rank 1 refused naming it; all four ranks failed naming it")


def flood(ringd):
    port = harness.free_port()
    directory = harness.work_dir("ringd-flood-")
    rank0 = start(ringd, 0, 4, port, directory, "rank0")
    wait_listening(port)
    sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
    others = [start(ringd, rank, 4, port, directory, f"rank{rank}") for rank in (1, 2, 3)]
    processes = [rank0, *others]
    started = time.monotonic()
    try:
        while any(p.poll() is None for p, _ in processes):
            check(time.monotonic() - started < 90, "the job is still running after 90 s")
            readable, _, _ = select.select(sockets, [], [], 0.05)
            for s in readable:  # closed by rank 0: dial again (while rank 0 still listens)
                sockets.remove(s)
                s.close()
                try:
                    sockets.append(socket.create_connection(("127.0.0.1", port)))
                except OSError:
                    pass
    finally:
        for p, _ in processes:
            if p.poll() is None:
                p.kill()
        for s in sockets:
            s.close()
    codes = [p.wait() for p, _ in processes]
    log = read(rank0[1])
    check(codes == [0, 0, 0, 0], f"exit codes {codes}: rank 0: {log[-3000:]}")
    lines = [line for line in log.splitlines() if "rejected connection" in line
             or "more connections rejected" in line]
    seconds = time.monotonic() - started
    # 10 lines one by one per 10 s, then one summary (~40,000 lines in 30 s before).
    check(len(lines) <= 11 * (int(seconds / 10) + 1),
          f"rank 0 logged {len(lines)} lines about the flood in {seconds:.1f} s")
    print(f"ok   200 silent connections: the job completed in {time.monotonic() - started:.1f} s, "
          f"rank 0 logged {len(lines)} lines about them")


def stranger(ringd):
    port = harness.free_port()
    directory = harness.work_dir("ringd-stranger-")
    job_a = harness.environment(RINGD_JOB_ID="job-a")
    processes = {"rank0": start(ringd, 0, 4, port, directory, "rank0", job_a)}
    wait_listening(port)
    processes["stranger"] = start(ringd, 1, 4, port, directory, "stranger",
                                  harness.environment(RINGD_JOB_ID="job-b"))
    stranger_code = processes["stranger"][0].wait(timeout=30)
    stranger_log = read(processes["stranger"][1])
    check(stranger_code != 0 and "RINGD_JOB_ID=job-b" in stranger_log
          and "RINGD_JOB_ID=job-a" in stranger_log and "two jobs share" in stranger_log,
          f"the stranger: exit {stranger_code}: {stranger_log}")
    for rank in (1, 2, 3):
        processes[f"rank{rank}"] = start(ringd, rank, 4, port, directory, f"rank{rank}", job_a)
    codes = wait_all(processes)
    for name in ("rank0", "rank1", "rank2", "rank3"):
        check(codes[name] == 0, f"{name} of job-a: exit {codes[name]}: {read(processes[name][1])}")
    with open(f"{directory}/rank0.out") as out:
        harness.check_bench_output("job-a", out.read(), 7)
    check("no identity" not in read(processes["rank0"][1]), "job-a was warned it has no identity")
    print("ok   a process of another job refused at once, naming both; the job ran with its own "
          "rank 1 (#wrong 0)")

    # Nothing identifies this job: rank 0 says so (and the job still runs).
    port = harness.free_port()
    bare = harness.environment()
    for variable in ("RINGD_JOB_SECRET", "RINGD_JOB_ID", "RINGD_JOB_SECRET_FILE"):
        bare.pop(variable, None)
    pair = [start(ringd, rank, 2, port, directory, f"bare{rank}", bare) for rank in (0, 1)]
    codes = [p.wait(timeout=60) for p, _ in pair]
    log = read(pair[0][1])
    check(codes == [0, 0] and "this job has no identity" in log,
          f"a job without identity: exit codes {codes}: rank 0: {log}")
    print("ok   a job nothing identifies: rank 0 warns that a stranger could join")


def test(ringd, args):
    stray(ringd)
    stranger(ringd)
    flood(ringd)


if __name__ == "__main__":
    harness.main(test)
