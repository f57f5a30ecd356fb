"""ringd.tensorflow on 4 ranks (processes started as torchrun would). One run of
workers/tensorflow_worker.py serves every test here (importing TensorFlow in 4 processes is what
takes time); each test reads its check."""

import pytest

pytest.importorskip("tensorflow")

from worker_launcher import checks_of_one_run  # noqa: E402

SIZE = 4
CHECKS = [
    "every_op_dtype",
    "scale_factors",
    "broadcast_and_allgather_every_dtype",
    "unsupported_dtypes_are_named",
    "compression",
    "grouped_and_reducescatter",
    "tape_matches_one_process",
    "predivide_and_groups",
    "indexed_slices",
    "broadcast_variables_and_objects",
    "mismatched_shapes_are_named",
    "keras_fit_matches_one_process",
]

results, test_the_worker_ran_every_check, test_on_every_rank = checks_of_one_run(
    "tensorflow_worker.py", SIZE, CHECKS, timeout=300)
