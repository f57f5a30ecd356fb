"""ringd.torch on CUDA tensors, 2 ranks (workers/cuda_worker.py): collectives of every dtype come
back on the tensor's device with the CPU's values, and DistributedOptimizer (no compression, fp16,
DGC) trains a CUDA model to where the same training on the CPU ends. Needs a GPU that torch can
use: skipped elsewhere (and so in CI, which has none); scripts/gpu_bundle.sh runs it on a GPU
machine (docs/performance.md)."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device that torch can use", allow_module_level=True)

from worker_launcher import checks_of_one_run  # noqa: E402

CHECKS = [
    "allreduce_every_dtype",
    "broadcast_allgather",
    "optimizer_none",
    "optimizer_fp16",
    "optimizer_dgc",
]

results, test_the_worker_ran_every_check, test_on_every_rank = checks_of_one_run(
    "cuda_worker.py", 2, CHECKS, timeout=240)
