"""DistributedOptimizer on 4 ranks (processes started as torchrun would): each rank trains a small
MLP on its quarter of every global batch and must end, to a relative difference of 1e-5, where one
process training on the whole batch ends (SGD with momentum, Adam; backward_passes_per_step=2;
gradient_predivide_factor; synchronize() + skip_synchronize() with clipping; fp16 to 1e-2); and
the broadcast helpers. One run of workers/optimizer_worker.py serves every test here."""

import pytest

pytest.importorskip("torch")

from common import assert_ok_on_every_rank, read_results  # noqa: E402
from worker_launcher import run_workers  # noqa: E402

SIZE = 4
CHECKS = [
    "sgd",
    "adam",
    "backward_passes_per_step_2",
    "gradient_predivide_factor",
    "skip_synchronize_with_clipping",
    "fp16_compression",
    "broadcast_parameters",
    "broadcast_optimizer_state",
    "zero_grad_warns",
    "second_backward_raises",
    "unused_parameters",
]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("optimizer")
    run_workers("optimizer_worker.py", SIZE, out_dir, timeout=120)
    return read_results(out_dir, SIZE)


def test_the_worker_ran_every_check(results):
    for rank_results in results:
        assert sorted(rank_results) == sorted(CHECKS)


@pytest.mark.parametrize("check", CHECKS)
def test_on_every_rank(results, check):
    assert_ok_on_every_rank(results, check)
