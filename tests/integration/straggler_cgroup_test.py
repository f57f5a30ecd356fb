#!/usr/bin/env python3
"""A rank slowed by a CPU quota is named as the straggler (issue 35, item 8): 4 standalone ranks of
`ringd train` over tcp on loopback, rank 2 in a cgroup of its own with 10% of one CPU (cgroup v2
cpu.max, or v1's cfs quota). Rank 0 must log "rank 2 is the straggler: ready N ms after the median
rank", and its metrics file must show rank 2's ringd_rank_lag_seconds as the largest. Needs root
and a cpu cgroup controller (exit 77: skipped otherwise); removes its cgroup in every case.

    straggler_cgroup_test.py RINGD_BINARY"""

import os
import pathlib
import re
import socket
import subprocess
import sys
import tempfile

SKIP = 77


def cgroup_dir():
    """(directory to create, how to set the quota) for this host's cgroup layout, or None."""
    v2 = pathlib.Path("/sys/fs/cgroup")
    if (v2 / "cgroup.controllers").exists() and "cpu" in (v2 / "cgroup.controllers").read_text():
        return v2 / f"ringd-straggler-{os.getpid()}", "v2"
    v1 = pathlib.Path("/sys/fs/cgroup/cpu")
    if (v1 / "cpu.cfs_quota_us").exists():
        return v1 / f"ringd-straggler-{os.getpid()}", "v1"
    return None


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main():
    ringd = sys.argv[1]
    if os.geteuid() != 0:
        print("SKIP: needs root (a cgroup of its own)")
        return SKIP
    found = cgroup_dir()
    if found is None:
        print("SKIP: no cpu cgroup controller")
        return SKIP
    group, version = found
    work = pathlib.Path(tempfile.mkdtemp(prefix="ringd-straggler-"))
    group.mkdir()
    try:
        if version == "v2":
            (group / "cpu.max").write_text("10000 100000\n")
        else:
            (group / "cpu.cfs_period_us").write_text("100000\n")
            (group / "cpu.cfs_quota_us").write_text("10000\n")
        port = free_port()
        metrics = work / "metrics.prom"
        procs = []
        for rank in range(4):
            env = dict(os.environ, RINGD_METRICS_FILE=str(metrics), OMP_NUM_THREADS="1")
            log = open(work / f"rank{rank}.log", "w")  # noqa: SIM115 - closed below
            procs.append((subprocess.Popen(
                [ringd, "train", "--rank", str(rank), "--size", "4", "--rendezvous",
                 f"127.0.0.1:{port}", "--transport", "tcp", "--epochs", "1", "--max-steps", "45",
                 "--batch-size", "2048", "--no-eval", "--timeout", "60"],
                env=env, stdout=log, stderr=subprocess.STDOUT), log))
            if rank == 2:
                (group / "cgroup.procs").write_text(f"{procs[-1][0].pid}\n")
        codes = []
        for proc, log in procs:
            try:
                codes.append(proc.wait(timeout=120))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append(proc.wait())
            log.close()
        rank0 = (work / "rank0.log").read_text()
        if codes != [0, 0, 0, 0]:
            print(f"FAIL the training exited {codes}:\n{rank0[-2000:]}")
            return 1
        warning = re.search(r"rank (\d+) is the straggler: ready (\d+) ms", rank0)
        lags = {int(rank): float(value) for rank, value in re.findall(
            r'ringd_rank_lag_seconds\{mode="allreduce",rank="(\d+)"\} (\S+)',
            metrics.read_text())}
        print(f"rank 0's warning: {warning.group(0) if warning else None}; lags (s): {lags}")
        if not warning or warning.group(1) != "2":
            print(f"FAIL rank 0 did not name rank 2 as the straggler:\n{rank0[-2000:]}")
            return 1
        if len(lags) != 4 or max(lags, key=lags.get) != 2:
            print(f"FAIL rank 2's lag is not the largest: {lags}")
            return 1
        print("ok   rank 2, slowed to 10% of a CPU, is named the straggler and lags most")
        return 0
    finally:
        for pid in (group / "cgroup.procs").read_text().split():
            try:  # anything left in the group goes back to the root before it is removed
                (group.parent / "cgroup.procs").write_text(f"{pid}\n")
            except OSError:
                pass
        group.rmdir()
        subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    sys.exit(main())
