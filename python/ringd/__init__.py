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

import os as _os
import sys as _sys

# ringd._core, libringd and the system's protobuf they link are loaded with RTLD_DEEPBIND: their
# own symbols first. TensorFlow loads its libraries RTLD_GLOBAL and exports its own copy of
# protobuf (another version); without this, libringd's protobuf calls imported after TensorFlow
# would bind partly to TensorFlow's copy and crash in the engine's first negotiation.
_flags = _sys.getdlopenflags()
_sys.setdlopenflags(_flags | _os.RTLD_DEEPBIND)
try:
    from ringd import _core  # noqa: E402
finally:
    _sys.setdlopenflags(_flags)

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
