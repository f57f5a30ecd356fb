"""The torch.distributed backend "ringd" (ringd.torch.process_group) on 3 ranks started as
torchrun would: init_process_group("ringd"), all_reduce (every op, four dtypes, a strided view),
broadcast, all_gather, reduce_scatter, reduce, the object collectives, barrier, async Work;
unmodified DDP (SGD with momentum, Adam) ends within 1e-5 of one process on the global batch;
unsupported calls, ops and dtypes name themselves; a new_group() of all ranks works and one of
some ranks fails at its first collective; different shapes raise on every rank naming the call;
(a dead peer during DDP's backward: test_torch_faults.py). One run of workers/process_group_worker.py serves every test here."""

import pytest

pytest.importorskip("torch")

from worker_launcher import checks_of_one_run  # noqa: E402

SIZE = 3
CHECKS = [
    "backend",
    "all_reduce_ops",
    "broadcast_all_gather_reduce_scatter",
    "objects_and_barrier",
    "async_work",
    "ddp_matches_one_process",
    "unsupported_calls_name_themselves",
    "groups",
    "mismatch_raises_naming_the_call",
]

results, test_the_worker_ran_every_check, test_on_every_rank = checks_of_one_run(
    "process_group_worker.py", SIZE, CHECKS)
