"""A rank killed in the middle of training: every survivor's model.fit (or tf.function step) fails
within ringd's timeout, naming the lost peer, instead of hanging
(workers/tensorflow_faults_worker.py)."""

import time

import pytest

pytest.importorskip("tensorflow")

from worker_launcher import Workers  # noqa: E402

SIZE = 3


@pytest.mark.parametrize("mode", ["fit", "tape"])
def test_a_killed_rank_ends_every_survivors_training(tmp_path, mode):
    started = time.monotonic()
    workers = Workers("tensorflow_faults_worker.py", SIZE, tmp_path, args=[mode],
                      env={"RINGD_TIMEOUT": "10"})
    codes = workers.wait(timeout=120)
    elapsed = time.monotonic() - started
    description = workers.describe(codes)
    assert codes[1] == 9, description
    for rank in (0, 2):
        assert codes[rank] == 3, description  # failed, not hung (None) and not finished (0)
        output = workers.output(rank)
        assert "training failed" in output and "[ringd:peer_lost]" in output, description
        assert "rank 1" in output, description
    assert elapsed < 100, f"survivors took {elapsed:.0f} s\n{description}"
