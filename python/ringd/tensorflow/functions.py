"""Variables and Python objects across the ranks: broadcast_variables, broadcast_object,
allgather_object (the objects pickled into bytes, eagerly, through ringd's NumPy collectives)."""

import io
import pickle

import numpy as np
import tensorflow as tf

from ringd import _runtime
from ringd import collectives as numpy_collectives
from ringd._runtime import name_or_default
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


def _pickled(obj):
    buffer = io.BytesIO()
    pickle.dump(obj, buffer, protocol=pickle.HIGHEST_PROTOCOL)
    return np.frombuffer(buffer.getbuffer(), dtype=np.uint8).copy()


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=None):
    """Rank root_rank's `obj` (pickled) on every rank. Eager only."""
    del session
    check_process_set(process_set)
    name = name_or_default(name, "broadcast_object")
    payload = _pickled(obj) if _runtime.rank() == root_rank else None
    length = np.array([0 if payload is None else payload.size], dtype=np.int64)
    numpy_collectives.broadcast_(length, root_rank, f"{name}.length")
    if payload is None:
        payload = np.empty(int(length[0]), dtype=np.uint8)
    numpy_collectives.broadcast_(payload, root_rank, name)
    return pickle.loads(payload.tobytes())


def allgather_object(obj, session=None, name=None, process_set=None):
    """Every rank's `obj` (pickled), as a list in rank order. Eager only."""
    del session
    check_process_set(process_set)
    name = name_or_default(name, "allgather_object")
    payload = _pickled(obj)
    lengths = numpy_collectives.allgather(np.array([payload.size], dtype=np.int64),
                                          f"{name}.lengths")
    gathered = numpy_collectives.allgather(payload, name)
    objects = []
    offset = 0
    for length in lengths.tolist():
        objects.append(pickle.loads(gathered[offset:offset + length].tobytes()))
        offset += length
    return objects
