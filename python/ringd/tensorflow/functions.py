"""Variables and Python objects across the ranks: broadcast_variables, broadcast_object,
allgather_object (the objects pickled into bytes, eagerly, through ringd's NumPy collectives)."""

import tensorflow as tf

from ringd import collectives as numpy_collectives
from ringd.tensorflow import _ops
from ringd.tensorflow.collectives import check_process_set, unique_name


def broadcast_variables(variables, root_rank, process_set=None, inplace=False):
    """Assigns rank `root_rank`'s values to `variables` on every rank (one submission for all of
    them); inside tf.function returns the op that does it."""
    del inplace
    check_process_set(process_set)
    variables = list(variables)
    if not variables:
        return None if tf.executing_eagerly() else tf.no_op()
    prefix = unique_name(None, "broadcast_variables")
    names = [f"{prefix}.{index}" for index in range(len(variables))]
    values = _ops.run(_ops.BROADCAST, [tf.convert_to_tensor(v) for v in variables], names,
                      root=int(root_rank))
    assigned = [variable.assign(value) for variable, value in zip(variables, values)]
    return None if tf.executing_eagerly() else tf.group(*assigned)


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=None):
    """Rank root_rank's `obj` (pickled) on every rank. Eager only."""
    del session
    check_process_set(process_set)
    return numpy_collectives.broadcast_object(obj, root_rank, name)


def allgather_object(obj, session=None, name=None, process_set=None):
    """Every rank's `obj` (pickled), as a list in rank order. Eager only."""
    del session
    check_process_set(process_set)
    return numpy_collectives.allgather_object(obj, name)
