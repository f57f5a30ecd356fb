"""ringd.torch: Horovod's PyTorch API on ringd, so a Horovod script ports by changing its import
(`import ringd.torch as hvd`).

  hvd.init()                                   # from mpirun's / torchrun's environment
  hvd.broadcast_parameters(model.state_dict(), root_rank=0)
  optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
  hvd.broadcast_optimizer_state(optimizer, root_rank=0)

Tensors: float32 float64 float16 bfloat16 int32 int64 uint8 (other dtypes: TypeError naming the
dtype); contiguous CPU tensors go to the engine without a copy, non-contiguous ones through a
contiguous copy, CUDA tensors through host memory (ringd.torch.tensors). Errors are
ringd.RingdError subclasses (re-exported here). Not supported: process sets, join(), sparse
gradients, Adasum. Beyond Horovod: Compression.dgc(...), deep gradient compression in the engine
(with set_epoch(epoch) for its warm-up; ringd.torch.compression.DGCCompressor); and importing
ringd.torch registers the torch.distributed backend "ringd" (ringd.torch.process_group), so an
unmodified DDP script runs on ringd with init_process_group("ringd").
"""

from ringd._core import (
    DeadlockError,
    InvalidArgumentError,
    MismatchError,
    PeerLostError,
    RingdError,
    RingdTimeoutError,
)
from ringd._runtime import (
    Average,
    Max,
    Min,
    Product,
    Sum,
    cross_rank,
    cross_size,
    init,
    is_initialized,
    local_rank,
    local_size,
    rank,
    shutdown,
    size,
)
from ringd.torch.collectives import (
    allgather,
    allgather_async,
    allreduce,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    barrier,
    broadcast,
    broadcast_,
    broadcast_async,
    broadcast_async_,
    grouped_allreduce,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    poll,
    reducescatter,
    synchronize,
)
from ringd.torch.compression import Compression
from ringd.torch.dgc import set_epoch
from ringd.torch.functions import (
    allgather_object,
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)
from ringd.torch.optimizer import DistributedOptimizer
from ringd.torch import elastic  # noqa: E402  (hvd.elastic.run, TorchState, ElasticSampler)

import torch.distributed as _distributed  # noqa: E402

if _distributed.is_available():  # torch.distributed.init_process_group("ringd")
    from ringd.torch.process_group import register as _register_backend

    _register_backend()

__all__ = [
    "Average", "Sum", "Min", "Max", "Product", "Compression",
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
    "grouped_allreduce_async_", "broadcast", "broadcast_", "broadcast_async", "broadcast_async_",
    "allgather", "allgather_async", "reducescatter", "synchronize", "poll", "barrier",
    "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object", "allgather_object",
    "DistributedOptimizer", "set_epoch", "elastic",
    "RingdError", "InvalidArgumentError", "MismatchError", "DeadlockError", "PeerLostError",
    "RingdTimeoutError",
]
