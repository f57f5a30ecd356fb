"""ringd.keras: Horovod's Keras API for Keras 3 on the TensorFlow backend (what tf.keras is since
TensorFlow 2.16), so a Horovod Keras script ports by its import line (`import ringd.keras as hvd`).

  hvd.init()
  optimizer = hvd.DistributedOptimizer(keras.optimizers.Adam(0.001 * hvd.size()))
  model.compile(optimizer=optimizer, loss=..., metrics=[...])
  model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                             hvd.callbacks.MetricAverageCallback()],
            verbose=1 if hvd.rank() == 0 else 0)

DistributedOptimizer averages the gradients across the ranks inside the optimizer's apply(), so
it works in model.fit (inside its tf.function) and in custom loops alike; the collectives are
ringd.tensorflow's. Other Keras backends (torch, JAX) raise NotImplementedError for now.
"""

import keras

from ringd.keras import callbacks
from ringd.keras.optimizer import DistributedOptimizer
from ringd.tensorflow import (
    Average,
    Compression,
    DeadlockError,
    InvalidArgumentError,
    Max,
    Min,
    MismatchError,
    PeerLostError,
    Product,
    RingdError,
    RingdTimeoutError,
    Sum,
    allgather,
    allgather_object,
    allreduce,
    barrier,
    broadcast,
    broadcast_object,
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
from ringd.tensorflow.functions import broadcast_variables


def broadcast_global_variables(root_rank, model=None):
    """Rank root_rank's model and optimizer variables on every rank (Keras 3 has no global
    collection: pass the model)."""
    if model is None:
        raise InvalidArgumentError("ringd.keras: broadcast_global_variables(root_rank, model): "
                                   "Keras 3 keeps no global variables; pass the model")
    variables = list(model.variables)
    if getattr(model, "optimizer", None) is not None:
        variables += list(model.optimizer.variables)
    broadcast_variables(variables, root_rank)


if keras.backend.backend() != "tensorflow":
    raise NotImplementedError(
        f"ringd.keras: Keras's backend is {keras.backend.backend()!r}; ringd.keras runs on the "
        "TensorFlow backend only (KERAS_BACKEND=tensorflow)")

__all__ = [
    "Average", "Sum", "Min", "Max", "Product", "Compression", "DistributedOptimizer", "callbacks",
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size", "allreduce", "allgather", "broadcast", "barrier",
    "broadcast_object", "allgather_object", "broadcast_global_variables",
    "RingdError", "InvalidArgumentError", "MismatchError", "DeadlockError", "PeerLostError",
    "RingdTimeoutError",
]
