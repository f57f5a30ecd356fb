"""Shared helpers for ringd's multi-process integration tests.

Every test script takes the path of the built `ringd` binary as its first argument. Scripts exit 0
on success, 1 on failure and 77 (ctest's SKIP_RETURN_CODE) with a printed reason when a
prerequisite is missing.
"""
import atexit
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
JSON_KEYS = {"op", "bytes", "count", "dtype", "redop", "ranks", "transport", "time_us",
             "algbw_GBps", "busbw_GBps", "wrong"}
# Ranks outnumber cores here: Open MPI must yield, and stay off shared-memory busy polling.
# Open MPI's traffic stays on loopback (the TCP BTL and the out-of-band channel): these are
# single-host tests, and must not depend on the host's other interfaces (a container bridge once
# made every one of them hang until its timeout).
MPIRUN_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--mca", "mpi_yield_when_idle", "1",
                "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
                "--mca", "oob_tcp_if_include", "lo"]


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def main(test):
    """Runs test(ringd_path, extra_args) and turns the outcome into an exit code."""
    ringd = os.path.abspath(sys.argv[1])
    check(os.access(ringd, os.X_OK), f"{ringd} is not an executable")
    started = time.monotonic()
    try:
        test(ringd, sys.argv[2:])
    except Failure as failure:
        print(f"FAIL: {failure}", flush=True)
        sys.exit(1)
    print(f"PASS ({time.monotonic() - started:.1f} s)", flush=True)
    sys.exit(0)


def require_mpirun():
    if shutil.which("mpirun") is None:
        print("SKIP: mpirun is not installed (Open MPI); the mpirun tests cannot run", flush=True)
        sys.exit(SKIP)


def work_dir(prefix):
    """A fresh directory under $TMPDIR, removed when the test process exits."""
    directory = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, directory, True)
    return directory


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(**overrides):
    env = dict(os.environ)
    env.setdefault("RINGD_JOB_SECRET", "integration-test-secret")
    env["OMPI_MCA_btl"] = "self,tcp"
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def table_rows(stdout):
    """The data rows of rank 0's nccl-tests style table: lists of 9 columns."""
    rows = []
    for line in stdout.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        columns = line.split()
        if len(columns) == 9 and columns[0].isdigit():
            rows.append(columns)
    return rows


def check_bench_output(label, stdout, expected_rows):
    rows = table_rows(stdout)
    check(len(rows) == expected_rows,
          f"{label}: expected {expected_rows} table rows, got {len(rows)}:\n{stdout}")
    for row in rows:
        check(row[8] == "0", f"{label}: #wrong is {row[8]} in row {' '.join(row)}")
    check("# Out of bounds values : 0 OK" in stdout, f"{label}: footer missing or FAILED:\n{stdout}")
    check(re.search(r"^# Avg bus bandwidth : [0-9.e+-]+$", stdout, re.M) is not None,
          f"{label}: no average bus bandwidth line:\n{stdout}")


def check_json(label, path, expected_rows, ranks, transport, op):
    with open(path) as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    check(len(lines) == expected_rows, f"{label}: {len(lines)} JSON lines, expected {expected_rows}")
    for line in lines:
        record = json.loads(line)
        check(set(record) == JSON_KEYS,
              f"{label}: JSON keys {sorted(record)} differ from {sorted(JSON_KEYS)}")
        check(record["wrong"] == 0, f"{label}: wrong={record['wrong']} in {line}")
        check(record["ranks"] == ranks and record["transport"] == transport and record["op"] == op,
              f"{label}: unexpected ranks/transport/op in {line}")
        check(record["time_us"] > 0 and record["busbw_GBps"] >= 0, f"{label}: bad numbers in {line}")


def sweep_rows(min_bytes, max_bytes, factor):
    rows, size = 0, min_bytes
    while size <= max_bytes:
        rows, size = rows + 1, size * factor
    return rows


def run(command, label, timeout, env=None):
    """Runs a command to completion; returns (exit code, stdout, stderr, seconds)."""
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env=env or environment(), start_new_session=True)
    except subprocess.TimeoutExpired as expired:
        raise Failure(f"{label}: still running after {timeout} s (hang?): {' '.join(command)}\n"
                      f"stdout:\n{expired.stdout}\nstderr:\n{expired.stderr}")
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def mpirun(np, args, extra_mpirun=()):
    return ["mpirun", *MPIRUN_FLAGS, *extra_mpirun, "-np", str(np), *args]


class Job:
    """Standalone ranks (no mpirun): one process per rank, joined through --rendezvous."""

    def __init__(self, ringd, size, args, env_per_rank=None, port=None, extra_per_rank=None):
        self.port = port or free_port()
        self.directory = work_dir("ringd-it-")
        self.processes = []
        for rank in range(size):
            command = [ringd, *args, "--rank", str(rank), "--size", str(size),
                       "--rendezvous", f"127.0.0.1:{self.port}"]
            if extra_per_rank:
                command += extra_per_rank(rank)
            env = environment(**((env_per_rank or {}).get(rank, {})))
            out = open(os.path.join(self.directory, f"rank{rank}.out"), "w+")
            err = open(os.path.join(self.directory, f"rank{rank}.err"), "w+")
            self.processes.append((subprocess.Popen(command, stdout=out, stderr=err, env=env), out,
                                   err))

    def output(self, rank):
        _, out, err = self.processes[rank]
        out.flush()
        err.flush()
        with open(out.name) as o, open(err.name) as e:
            return o.read(), e.read()

    def wait_for_stdout(self, rank, text, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output(rank)[0]:
                return
            if self.processes[rank][0].poll() is not None:
                break
            time.sleep(0.05)
        raise Failure(f"rank {rank} never printed {text!r}: {self.output(rank)}")

    def wait(self, timeout):
        """Exit codes of every rank; kills everything on timeout."""
        return wait_all([p for p, _, _ in self.processes], timeout, lambda rank: (
            f"rank {rank} still running after {timeout} s (hang?); outputs: "
            + "\n".join(f"rank {r}: {self.output(r)}" for r in range(len(self.processes)))))

    def kill_all(self):
        kill_all([p for p, _, _ in self.processes])


def wait_all(processes, timeout, hung):
    """Exit codes of the Popen `processes`, `timeout` s for all of them; when one is still running
    then, every one left is killed and Failure(hung(its index)) raised."""
    deadline = time.monotonic() + timeout
    codes = []
    for i, process in enumerate(processes):
        try:
            codes.append(process.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            kill_all(processes)
            raise Failure(hung(i))
    return codes


def kill_all(processes):
    """SIGKILLs and reaps the Popen `processes` still running."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()
