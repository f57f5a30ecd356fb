"""No hangs and the right rank blamed, as careless users meet them through the Python package
(workers/misuse_worker.py; 2 ranks, RINGD_TIMEOUT=10, the stall settings at their defaults).
Every run is bounded by worker_launcher, so a regression fails instead of hanging."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from worker_launcher import Workers

pytest.importorskip("numpy")

TIMEOUT_S = 10


def run(tmp_path, scenario, expected_codes=(0, 0)):
    workers = Workers("misuse_worker.py", 2, tmp_path, args=[scenario],
                      env={"RINGD_TIMEOUT": str(TIMEOUT_S)})
    codes = workers.wait(timeout=60)
    assert codes == list(expected_codes), workers.describe(codes)
    return workers


def read(out_dir, name):
    return json.loads((out_dir / name).read_text())


def test_synchronous_calls_in_different_orders_raise_deadlock_error_on_every_rank(tmp_path):
    run(tmp_path, "order")
    for rank in (0, 1):
        result = read(tmp_path, f"rank{rank}.json")
        assert result["error"] == "DeadlockError", result
        assert result["mismatch"], result  # a DeadlockError is a MismatchError
        assert result["seconds"] < TIMEOUT_S / 2, result  # detected, not timed out
        assert "rank 0 waits on 'a'" in result["message"], result
        assert "rank 1 waits on 'b'" in result["message"], result
        assert result["after"] == [2.0, 2.0, 2.0], result


def test_uneven_steps_then_barrier_raise_deadlock_error_naming_the_step(tmp_path):
    run(tmp_path, "uneven_barrier")
    for rank in (0, 1):
        result = read(tmp_path, f"rank{rank}.json")
        assert result["error"] == "DeadlockError", result
        assert "rank 0 waits on 'grad' (pending there: 'grad' (its 4th)" in result["message"]
        assert "rank 1 waits on 'barrier.noname.0'" in result["message"], result
        assert "uneven data" in result["message"], result


@pytest.mark.parametrize("ending, code, reason", [
    ("shutdown", 0, "its reason: shutdown() was called on this rank"),
    ("exit", 0, "its reason: its process is exiting without an uncaught exception"),
    ("exception", 1, "): its process is exiting on an uncaught ValueError: boom on rank 1"),
])
def test_a_rank_that_stops_early_is_named_with_its_count_and_reason(tmp_path, ending, code,
                                                                   reason):
    workers = run(tmp_path, f"early_{ending}", expected_codes=(0, code))
    result = read(tmp_path, "rank0.json")
    assert result["error"] == "PeerLostError", result
    message = result["message"]
    assert "tensor 'grad' (its 4th submission here)" in message, result
    stopped = "failed and shut down" if ending == "exception" else "has shut down"
    assert f"rank 1 {stopped} after completing it 3 times" in message, result
    assert reason in message, result
    # A rank that ended early hints at uneven data; one that failed is reported as a failure.
    assert ("Uneven data" in message) == (ending != "exception"), result
    assert result["seconds"] < TIMEOUT_S / 2, result
    if ending == "exception":
        assert "ValueError: boom on rank 1" in workers.output(1)  # the traceback still prints


def test_unnamed_calls_from_two_threads_at_once_are_refused(tmp_path):
    run(tmp_path, "threads")
    for rank in (0, 1):
        seen = read(tmp_path, f"rank{rank}.json")
        assert seen["first"] == [3.0, 3.0], seen
        assert seen["first_again"] == [3.0, 3.0], seen
        assert "also makes unnamed calls" in seen["second"], seen
        assert "Pass name=" in seen["second"], seen
        assert seen["later"] == [2.0, 2.0], seen


def test_a_forked_child_exits_and_its_collective_raises_at_once(tmp_path):
    run(tmp_path, "fork")
    for rank in (0, 1):
        result = read(tmp_path, f"rank{rank}.json")
        assert result["os.fork"] == 0, result
        assert result["mp"] == 0, result
        assert result["after"] == [2.0, 2.0, 2.0], result
        for how in ("os.fork", "mp"):
            child = read(tmp_path, f"child{rank}-{how}.json")
            assert child["error"] == "InvalidArgumentError", child
            assert "is a child forked after the job was opened" in child["message"], child
            assert child["seconds"] < 1, child


def test_ctrl_c_interrupts_init_while_a_peer_is_missing(tmp_path):
    workers = Workers("misuse_worker.py", 2, tmp_path, args=["init_ctrl_c"],
                      env={"RINGD_TIMEOUT": "30"})
    deadline = time.monotonic() + 30
    while "opening" not in workers.output(0):
        assert time.monotonic() < deadline, workers.describe(workers.wait(0))
        time.sleep(0.05)
    time.sleep(1.0)  # inside init(), waiting for rank 1
    workers.procs[0].send_signal(signal.SIGINT)
    start = time.monotonic()
    code = workers.procs[0].wait(timeout=20)
    exited_after = time.monotonic() - start
    codes = workers.wait(timeout=0)  # rank 1 is killed
    assert code == 0, workers.describe(codes)
    result = read(tmp_path, "rank0.json")
    assert result["interrupted"], result
    assert result["seconds"] < 5, result  # not RINGD_TIMEOUT's 30 s
    assert exited_after < 5, exited_after


# ---- under mpirun: a rank that never starts ringd holds the others in MPI_Init ----

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "mpi_yield_when_idle", "1",
          "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
          "--mca", "oob_tcp_if_include", "lo"]
# Rank 0 initialises ringd; rank 1 is a process that never does (`sleep`).
INIT = ("import os, sys, ringd\n"
        "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
        "ringd.init()\n"
        "print('initialized', flush=True)\n")


def mpirun_env(**extra):
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                **extra)


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
@pytest.mark.parametrize("transport", ["mpi", "tcp"])
def test_a_rank_that_never_starts_under_mpirun_is_named_within_the_timeout(tmp_path, transport):
    started = time.monotonic()
    result = subprocess.run(
        [*MPIRUN, "-np", "1", sys.executable, "-c", INIT, str(tmp_path / "pid"), ":",
         "-np", "1", "sleep", "60"],
        env=mpirun_env(RINGD_TIMEOUT="4", RINGD_TRANSPORT=transport), capture_output=True,
        text=True, timeout=60)
    seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "initialized" not in output, output
    assert "rank 0: MPI_Init has waited 4 s" in output, output
    assert "missing: rank 1" in output, output
    assert seconds < 20, f"{seconds:.1f} s: {output}"


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_ctrl_c_ends_an_init_that_waits_in_mpi_init(tmp_path):
    pid_file = tmp_path / "pid"
    job = subprocess.Popen(
        [*MPIRUN, "-np", "1", sys.executable, "-c", INIT, str(pid_file), ":",
         "-np", "1", "sleep", "60"],
        env=mpirun_env(RINGD_TIMEOUT="60"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text()):
            assert time.monotonic() < deadline, "rank 0 never started"
            time.sleep(0.05)
        time.sleep(1.5)  # inside ringd.init(), waiting in MPI_Init for rank 1
        interrupted = time.monotonic()
        os.kill(int(pid_file.read_text()), signal.SIGINT)
        output, _ = job.communicate(timeout=30)
        seconds = time.monotonic() - interrupted
    finally:
        if job.poll() is None:
            job.kill()
    assert "interrupted (SIGINT) while MPI_Init waited" in output, output
    assert seconds < 10, f"{seconds:.1f} s after Ctrl-C: {output}"
