"""DistributedOptimizer on 4 ranks (processes started as torchrun would): each rank trains a small
MLP on its quarter of every global batch and must end, to a relative difference of 1e-5, where one
process training on the whole batch ends (SGD with momentum, Adam; backward_passes_per_step=2;
gradient_predivide_factor; synchronize() + skip_synchronize() with clipping; fp16 to 1e-2); both
ways a gradient reaches the engine (directly, or staged: non-contiguous, a Python compressor); and
the broadcast helpers. One run of workers/optimizer_worker.py serves every test here."""

import pytest

pytest.importorskip("torch")

from worker_launcher import checks_of_one_run  # noqa: E402

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
    "every_gradient_layout_and_path",
]


results, test_the_worker_ran_every_check, test_on_every_rank = checks_of_one_run(
    "optimizer_worker.py", SIZE, CHECKS)
