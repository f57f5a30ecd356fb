"""ringd.torch's and ringd's collectives on 4 ranks (processes started as torchrun would), every
op x dtype x shape against its closed form. One run of workers/collectives_worker.py serves every
test here (importing torch in 4 processes is what takes time); each test reads its check."""

import pytest

pytest.importorskip("torch")

from common import assert_ok_on_every_rank, read_results  # noqa: E402
from worker_launcher import run_workers  # noqa: E402

SIZE = 4
CHECKS = [
    "allreduce_every_op_dtype_shape",
    "numpy_allreduce_every_op_dtype",
    "numpy_broadcast_allgather_reducescatter",
    "in_place_keeps_identity_and_handles_non_contiguous",
    "in_place_bumps_the_autograd_version",
    "broadcast_every_dtype",
    "allgather_rows_differ_per_rank",
    "grouped_allreduce",
    "reducescatter",
    "compression",
    "scale_factors",
    "objects",
    "autograd",
    "mismatched_shapes_fail_on_every_rank_naming_the_tensor",
    "poll_and_unnamed_calls",
    "identity",
]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("collectives")
    run_workers("collectives_worker.py", SIZE, out_dir, timeout=120)
    return read_results(out_dir, SIZE)


def test_the_worker_ran_every_check(results):
    for rank_results in results:
        assert sorted(rank_results) == sorted(CHECKS)


@pytest.mark.parametrize("check", CHECKS)
def test_on_every_rank(results, check):
    assert_ok_on_every_rank(results, check)
