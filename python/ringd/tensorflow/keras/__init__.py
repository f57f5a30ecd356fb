"""ringd.tensorflow.keras: Horovod's `horovod.tensorflow.keras` for whatever `tf.keras` is, so a
Horovod tf.keras script ports by its import line. With TensorFlow >= 2.16 `tf.keras` is Keras 3
(this module is then ringd.keras); with TF_USE_LEGACY_KERAS=1 it is tf_keras, Keras 2, and the
callbacks here are tf_keras callbacks (the same logic as ringd.keras's). DistributedOptimizer
takes either Keras's optimizers."""

import tensorflow as tf

from ringd.keras import (  # noqa: F401 - the API, re-exported
    Average,
    Compression,
    DeadlockError,
    DistributedOptimizer,
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
    broadcast_global_variables,
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

if tf.keras.__name__.startswith("tf_keras"):
    from ringd.tensorflow.keras import callbacks  # noqa: F401 - tf_keras's
else:
    from ringd.keras import callbacks  # noqa: F401 - Keras 3's
