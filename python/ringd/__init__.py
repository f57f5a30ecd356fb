"""ringd: data-parallel allreduce (ring collectives and a tensor-fusion engine) for Python.

The compiled part is ringd._core (python/src/); this package re-exports it. Every error ringd
raises is a RingdError (a RuntimeError) of the class its C++ ErrorCode names, with the C++
message; InvalidArgumentError is a ValueError too.

Two levels:
  * ringd.Job: a job you open and hold yourself, with allreduce/broadcast/allgather on arrays.
  * Horovod's module-level API on NumPy arrays (ringd.collectives): init(), rank(), size(), ...,
    allreduce(_)(_async), grouped_allreduce, broadcast(_), allgather, reducescatter, barrier,
    synchronize, poll, with the ops Average Sum Min Max Product. ringd.torch is the same over
    torch tensors, plus DistributedOptimizer.
"""

# ringd._core with libringd bound to its own protobuf, not TensorFlow's (ringd/_native.py says how
# and why).
from ringd._native import load_core as _load_core

_load_core()

from ringd._core import (  # noqa: E402
    DeadlockError,
    AuthError,
    Handle,
    InternalError,
    InvalidArgumentError,
    Job,
    MismatchError,
    PeerLostError,
    ProtocolError,
    RingdError,
    RingdIOError,
    RingdTimeoutError,
    UnavailableError,
    __version__,
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

__all__ = [
    "AuthError",
    "DeadlockError",
    "Handle",
    "InternalError",
    "InvalidArgumentError",
    "Job",
    "MismatchError",
    "PeerLostError",
    "ProtocolError",
    "RingdError",
    "RingdIOError",
    "RingdTimeoutError",
    "UnavailableError",
    "__version__",
    "Average", "Sum", "Min", "Max", "Product",
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size",
]

try:
    import numpy as _numpy  # noqa: F401 - the array API needs it; the rest of ringd does not
except ImportError:
    pass
else:
    from ringd.collectives import (
        allgather,
        allgather_async,
        allgather_object,
        allreduce,
        allreduce_,
        allreduce_async,
        allreduce_async_,
        barrier,
        broadcast,
        broadcast_,
        broadcast_async,
        broadcast_async_,
        broadcast_object,
        grouped_allreduce,
        grouped_allreduce_,
        grouped_allreduce_async_,
        poll,
        reducescatter,
        synchronize,
    )

    __all__ += [
        "allgather", "allgather_async", "allgather_object", "allreduce", "allreduce_",
        "allreduce_async", "allreduce_async_", "barrier", "broadcast", "broadcast_",
        "broadcast_async", "broadcast_async_", "broadcast_object", "grouped_allreduce",
        "grouped_allreduce_", "grouped_allreduce_async_", "poll", "reducescatter", "synchronize",
    ]
