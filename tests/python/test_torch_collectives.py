"""ringd.torch's and ringd's collectives on 4 ranks (processes started as torchrun would), every
op x dtype x shape against its closed form. One run of workers/collectives_worker.py serves every
test here (importing torch in 4 processes is what takes time); each test reads its check."""

import pytest

pytest.importorskip("torch")

from worker_launcher import checks_of_one_run  # noqa: E402

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


results, test_the_worker_ran_every_check, test_on_every_rank = checks_of_one_run(
    "collectives_worker.py", SIZE, CHECKS)
