"""`ringd train --tensorboard DIR`: the `tensorboard` package reads rank 0's event files.

Runs the `ringd` binary of the build (RINGD_BINARY, else bin/ringd under the working directory,
which is the build directory under ctest, else build/bin/ringd of the checkout); skipped without
it, without the tensorboard package or without the Fashion-MNIST files.
"""

import math
import os
import pathlib
import subprocess

import pytest

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path("/usr/share/datasets/fashion-mnist")
TAGS = ["train/loss", "train/accuracy", "train/samples_per_s", "train/communication_ratio",
        "test/accuracy"]


def ringd_binary():
    candidates = [os.environ.get("RINGD_BINARY"), pathlib.Path.cwd() / "bin" / "ringd",
                  REPO / "build" / "bin" / "ringd"]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return str(candidate)
    pytest.skip("no ringd binary (set RINGD_BINARY or run from the build directory)")


def test_tensorboard_reads_a_training_run(tmp_path):
    if not any(DATA.glob("train-images-idx3-ubyte*")):
        pytest.skip(f"no Fashion-MNIST in {DATA} (apt-get install dataset-fashion-mnist)")
    logdir = tmp_path / "runs" / "mlp"  # created by ringd, parents too
    epochs, steps_per_epoch = 2, 1024 // 64  # 2 ranks x batch 32
    result = subprocess.run(
        [ringd_binary(), "train", "--transport", "inproc", "--ranks", "2", "--epochs", str(epochs),
         "--train-limit", "1024", "--test-limit", "256", "--log-every", "4", "--data", str(DATA),
         "--tensorboard", str(logdir)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    files = list(logdir.iterdir())
    assert len(files) == 1 and "tfevents" in files[0].name, files

    acc = event_accumulator.EventAccumulator(str(logdir))
    acc.Reload()
    assert sorted(acc.Tags()["scalars"]) == sorted(TAGS)
    total = epochs * steps_per_epoch
    for tag in TAGS[:4]:
        steps = [event.step for event in acc.Scalars(tag)]
        assert steps == list(range(4, total + 1, 4)), (tag, steps)
    losses = [event.value for event in acc.Scalars("train/loss")]
    assert all(math.isfinite(v) and v > 0 for v in losses), losses
    for tag in ("train/accuracy", "test/accuracy", "train/communication_ratio"):
        values = [event.value for event in acc.Scalars(tag)]
        assert all(0 <= v <= 1 for v in values), (tag, values)
    rates = [event.value for event in acc.Scalars("train/samples_per_s")]
    assert all(math.isfinite(v) and v > 0 for v in rates), rates
    tests = acc.Scalars("test/accuracy")
    assert [event.step for event in tests] == [steps_per_epoch * (e + 1) for e in range(epochs)]
    # The last test accuracy is the one the summary prints (k/256 is exact in float32).
    assert f"test accuracy: {tests[-1].value:.4f}" in result.stdout, result.stdout
