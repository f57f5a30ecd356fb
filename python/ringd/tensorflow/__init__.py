"""ringd.tensorflow: Horovod's TensorFlow 2 API on ringd, so a Horovod script ports by changing
its import (`import ringd.tensorflow as hvd`).

  hvd.init()                                  # mpirun's / torchrun's environment, or TF_CONFIG
  with tf.GradientTape() as tape:
      loss = ...
  tape = hvd.DistributedGradientTape(tape)
  gradients = tape.gradient(loss, model.trainable_variables)
  hvd.broadcast_variables(model.variables, root_rank=0)   # after the first step

Collectives work eagerly and inside tf.function through two of ringd's TensorFlow ops, built on
first import against the installed TensorFlow's C API (ringd/tensorflow/_build.py says why).
Errors: eagerly ringd.RingdError subclasses (re-exported here); inside tf.function the step fails
with TensorFlow's op error carrying ringd's message ("[ringd:peer_lost] ..."). Not supported:
process sets, join(), Adasum. Tensors on a GPU reach the engine through host memory (TensorFlow
places ringd's ops on the CPU and copies them).
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
    is_initialized,
    local_rank,
    local_size,
    rank,
    shutdown,
    size,
)
from ringd.tensorflow import _ops
from ringd.tensorflow.collectives import (
    allgather,
    allreduce,
    barrier,
    broadcast,
    grouped_allreduce,
    reducescatter,
)
from ringd.tensorflow.compression import Compression
from ringd.tensorflow.functions import allgather_object, broadcast_object, broadcast_variables
from ringd.tensorflow.gradient_tape import DistributedGradientTape
from ringd.tensorflow.topology import init

_ops.ops()  # compile (once per TensorFlow) and load the ops now, not inside the first step

__all__ = [
    "Average", "Sum", "Min", "Max", "Product", "Compression",
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size",
    "allreduce", "grouped_allreduce", "allgather", "broadcast", "reducescatter", "barrier",
    "broadcast_variables", "broadcast_object", "allgather_object", "DistributedGradientTape",
    "RingdError", "InvalidArgumentError", "MismatchError", "DeadlockError", "PeerLostError",
    "RingdTimeoutError",
]
