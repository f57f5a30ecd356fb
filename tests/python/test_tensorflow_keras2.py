"""ringd.tensorflow.keras on tf_keras (Keras 2, TF_USE_LEGACY_KERAS=1) on 3 ranks: model.fit
against one process, the learning-rate callbacks (workers/tensorflow_keras2_worker.py)."""

import pytest

pytest.importorskip("tf_keras")

from worker_launcher import run_workers  # noqa: E402
from common import assert_ok_on_every_rank, read_results  # noqa: E402

SIZE = 3
CHECKS = ["keras2_fit_matches_one_process", "learning_rate_callbacks"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("keras2")
    run_workers("tensorflow_keras2_worker.py", SIZE, out_dir, env={"TF_USE_LEGACY_KERAS": "1"},
                timeout=300)
    return read_results(out_dir, SIZE)


@pytest.mark.parametrize("check", CHECKS)
def test_on_every_rank(results, check):
    assert_ok_on_every_rank(results, check)
