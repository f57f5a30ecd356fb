"""Deep gradient compression through ringd.torch (Compression.dgc) on 4 ranks: the collective and
DistributedOptimizer's reduced gradients equal a NumPy reference of the paper's algorithm; the
optimizer's momentum moves into the compressor; the warm-up follows set_epoch(); settings that
differ across ranks raise MismatchError on every rank; bad or changed settings are refused. One
run of workers/dgc_worker.py serves every test here."""

import pytest

pytest.importorskip("torch")

from common import assert_ok_on_every_rank, read_results  # noqa: E402
from worker_launcher import run_workers  # noqa: E402

SIZE = 4
CHECKS = [
    "bad_settings",
    "disagreeing_ranks",
    "optimizer_refusals",
    "allreduce_reference",
    "warmup",
    "optimizer_reference",
    "other_settings_refused",
]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("dgc")
    run_workers("dgc_worker.py", SIZE, out_dir, timeout=120)
    return read_results(out_dir, SIZE)


def test_the_worker_ran_every_check(results):
    for rank_results in results:
        assert sorted(rank_results) == sorted(CHECKS)


@pytest.mark.parametrize("check", CHECKS)
def test_on_every_rank(results, check):
    assert_ok_on_every_rank(results, check)
