"""ringd.torch when things go wrong across processes: a dead peer, Ctrl-C in a wait. Every run is
bounded (worker_launcher kills what is left), so nothing hangs."""

import json
import signal
import time

import pytest

pytest.importorskip("torch")

from worker_launcher import Workers  # noqa: E402

TIMEOUT_S = 5


def read(out_dir, rank):
    return json.loads((out_dir / f"rank{rank}.json").read_text())


def test_a_dead_peer_raises_on_every_survivor_within_the_timeout(tmp_path):
    workers = Workers("faults_worker.py", 3, tmp_path, args=["dead_peer"],
                      env={"RINGD_TIMEOUT": str(TIMEOUT_S)})
    codes = workers.wait(timeout=60)
    assert codes == [0, 0, -signal.SIGKILL], workers.describe(codes)
    for rank in (0, 1):
        result = read(tmp_path, rank)
        assert result["error"] in ("PeerLostError", "RingdTimeoutError"), result
        assert result["seconds"] < 2 * TIMEOUT_S, result
        assert "'after.death'" in result["message"], result  # the tensor
        assert "peer rank" in result["message"] and "rank 2" in result["message"], result


def test_a_dead_peer_fails_ddp_on_the_ringd_backend_within_the_timeout(tmp_path):
    """DDP's reducer waits on the Future the completion thread fails; a plain all_reduce after
    it raises from the call (ringd.torch.process_group)."""
    workers = Workers("faults_worker.py", 3, tmp_path, args=["ddp_dead_peer"],
                      env={"RINGD_TIMEOUT": str(TIMEOUT_S)})
    codes = workers.wait(timeout=60)
    assert codes == [0, 0, -signal.SIGKILL], workers.describe(codes)
    for rank in (0, 1):
        result = read(tmp_path, rank)
        for what in ("backward", "all_reduce"):
            assert result[what]["error"] is not None, (what, result)
            assert result[what]["seconds"] < 2 * TIMEOUT_S, (what, result)
        assert "torch.0.allreduce." in result["backward"]["message"], result  # the bucket
        assert "rank 2" in result["backward"]["message"], result


def test_uneven_data_under_ddp_then_barrier_raises_deadlock_on_every_rank(tmp_path):
    workers = Workers("faults_worker.py", 2, tmp_path, args=["ddp_uneven"],
                      env={"RINGD_TIMEOUT": "20"})
    codes = workers.wait(timeout=60)
    assert codes == [0, 0], workers.describe(codes)
    for rank in (0, 1):
        result = read(tmp_path, rank)
        assert result["error"] is not None, result
        assert "deadlock: no rank can make progress" in result["message"], result
        assert "rank 1 waits on 'torch.0.barrier." in result["message"], result
        assert result["seconds"] < 10, result  # detected, not timed out


def test_ctrl_c_interrupts_a_blocked_synchronize(tmp_path):
    workers = Workers("faults_worker.py", 2, tmp_path, args=["ctrl_c"])
    deadline = time.monotonic() + 60
    while "waiting" not in workers.output(0):
        assert time.monotonic() < deadline, workers.describe(workers.wait(0))
        assert workers.procs[0].poll() is None, workers.describe(workers.wait(0))
        time.sleep(0.05)
    time.sleep(0.3)  # into the wait (a signal before it would raise KeyboardInterrupt too)
    workers.procs[0].send_signal(signal.SIGINT)
    codes = workers.wait(timeout=30)
    assert codes == [0, 0], workers.describe(codes)
    assert read(tmp_path, 0) == {"interrupted": True, "still_pending": True}
    assert read(tmp_path, 1)["error"] == "PeerLostError"
