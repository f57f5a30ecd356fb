"""Deep gradient compression through ringd.torch (Compression.dgc) on 4 ranks: the collective and
DistributedOptimizer's reduced gradients equal a NumPy reference of the paper's algorithm; the
optimizer's momentum moves into the compressor; the warm-up follows set_epoch(); settings that
differ across ranks raise MismatchError on every rank; bad or changed settings are refused. One
run of workers/dgc_worker.py serves every test here."""

import pytest

pytest.importorskip("torch")

from worker_launcher import checks_of_one_run  # noqa: E402

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


results, test_the_worker_ran_every_check, test_on_every_rank = checks_of_one_run(
    "dgc_worker.py", SIZE, CHECKS)
