"""Horovod's TensorFlow collectives on ringd's engine: allreduce, grouped_allreduce, allgather,
broadcast, reducescatter, barrier; eager or inside tf.function (ringd.tensorflow._ops builds the
ops). Dtypes: reductions over float32 float64 float16 bfloat16 int32 int64 uint8; broadcast and
allgather of every fixed-size dtype (moved as bytes where the engine has no such dtype); others
raise TypeError naming the dtype. Average of integers is the sum floor-divided by the number of
ranks (as Horovod). tf.IndexedSlices are allreduced as Horovod does: values and indices
allgathered (Average divides the values by the number of ranks), unless densified first.
"""

import tensorflow as tf

from ringd import _runtime
from ringd._core import InvalidArgumentError
from ringd._runtime import Average, Sum, name_or_default, op_from_average
from ringd.collectives import scatter_rows
from ringd.tensorflow import _ops
from ringd.tensorflow.compression import Compression, wire

REDUCED_DTYPES = (tf.float32, tf.float64, tf.float16, tf.bfloat16, tf.int32, tf.int64, tf.uint8)


def unique_name(name, kind):
    """`name`, or a generated one that is the same on every rank: in a graph (tf.function) the
    graph's next "ringd.<kind>" (each trace names its ops alike on every rank), eagerly the
    per-process counters of ringd._runtime."""
    if name is not None:
        return str(name)
    if tf.executing_eagerly():
        return name_or_default(None, kind)
    return tf.compat.v1.get_default_graph().unique_name(f"ringd.{kind}", mark_as_used=True)


def check_process_set(process_set):
    if process_set is not None and getattr(process_set, "process_set_id", 0) != 0:
        raise NotImplementedError("ringd: process sets are not supported; every collective runs "
                                  "on all ranks")


def check_reducible(tensor, name):
    if tensor.dtype not in REDUCED_DTYPES:
        raise TypeError(f"ringd: tensor '{name}' has dtype {tensor.dtype.name}, which ringd does "
                        "not reduce; convert it to one of "
                        + ", ".join(dtype.name for dtype in REDUCED_DTYPES))


def _scale(tensor, factor):
    if factor == 1.0:
        return tensor
    if tensor.dtype.is_floating:
        return tensor * tf.cast(factor, tensor.dtype)
    return tf.cast(tf.cast(tensor, tf.float64) * factor, tensor.dtype)


class PendingAllreduce:
    """Dense tensors submitted to the engine (start_allreduce); finish() the results from the
    engine's outputs."""

    def __init__(self, submitted, divide_after, postscale_factor):
        self.submitted = submitted
        self.divide_after = divide_after
        self.postscale_factor = postscale_factor

    def finish(self, outputs):
        results = []
        for output in outputs:
            if self.divide_after:  # integer Average: the sum, floor-divided
                output = output // tf.cast(_runtime.size(), output.dtype)
            results.append(_scale(output, self.postscale_factor))
        return results


def start_allreduce(tensors, names, op, compression=Compression.none, prescale_factor=1.0,
                    postscale_factor=1.0, group=""):
    """Submits dense `tensors` (one RingdSubmit op); returns a PendingAllreduce."""
    tensors = [tf.convert_to_tensor(tensor) for tensor in tensors]
    for tensor, name in zip(tensors, names):
        check_reducible(tensor, name)
    integer_average = op == Average and not all(t.dtype.is_floating for t in tensors)
    if integer_average and any(t.dtype.is_floating for t in tensors):
        # One op per kind of division: the floats average in the engine, the integers do not.
        raise InvalidArgumentError("ringd: a grouped Average mixes integer and floating tensors; "
                                   "group them separately")
    engine_op = "sum" if integer_average else op
    scaled = [_scale(tensor, prescale_factor) for tensor in tensors]
    submitted = _ops.submit(_ops.ALLREDUCE, scaled, names, group=group, op=engine_op,
                            compression=wire(compression))
    return PendingAllreduce(submitted, integer_average, postscale_factor)


def sparse_allreduce(slices, name, op):
    """Horovod's rule for tf.IndexedSlices: every rank's values and indices, concatenated
    (Average: values divided by the number of ranks); Sum or Average only."""
    if op not in (Average, Sum):
        raise InvalidArgumentError(f"ringd: tensor '{name}' is a tf.IndexedSlices, which "
                                   f"allreduces with Sum or Average only, not {op!r} (densify it "
                                   "with tf.convert_to_tensor first)")
    # One submission and one wait for both (their first dimensions agree on every rank).
    values, indices = _ops.run(_ops.ALLGATHER, [slices.values, slices.indices],
                               [f"{name}.values", f"{name}.indices"])
    if op == Average:
        values = values / tf.cast(_runtime.size(), values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


def allreduce(tensor, average=None, device_dense="", device_sparse="",
              compression=Compression.none, op=None, prescale_factor=1.0, postscale_factor=1.0,
              name=None, process_set=None, ignore_name_scope=False):
    """`op` (default Average) over every rank's `tensor`; a new tensor of the same shape."""
    del device_dense, device_sparse, ignore_name_scope  # placement: TensorFlow's (ops on the CPU)
    check_process_set(process_set)
    op = op_from_average(op, average)
    name = unique_name(name, "allreduce")
    if isinstance(tensor, tf.IndexedSlices):
        return sparse_allreduce(tensor, name, op)
    pending = start_allreduce([tensor], [name], op, compression, prescale_factor,
                              postscale_factor)
    return pending.finish(_ops.wait([pending.submitted])[0])[0]


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=None, name=None):
    """allreduce of every tensor of the list as one group: none runs before all of them are
    ready on every rank."""
    del device_dense, device_sparse
    check_process_set(process_set)
    op = op_from_average(op, average)
    tensors = list(tensors)
    if not tensors:
        return []
    group = unique_name(name, "grouped_allreduce")
    if any(isinstance(tensor, tf.IndexedSlices) for tensor in tensors):
        raise InvalidArgumentError("ringd: grouped_allreduce of tf.IndexedSlices; densify them "
                                   "(tf.convert_to_tensor) or allreduce them one by one")
    names = [f"{group}.{index}" for index in range(len(tensors))]
    pending = start_allreduce(tensors, names, op, compression, prescale_factor, postscale_factor,
                              group=group)
    return pending.finish(_ops.wait([pending.submitted])[0])


def _for_allgather(tensor):
    tensor = tf.convert_to_tensor(tensor)
    return tf.reshape(tensor, [1]) if tensor.shape.rank == 0 else tensor


def allgather(tensor, name=None, ignore_name_scope=False, process_set=None):
    """Every rank's `tensor` concatenated along the first dimension (which may differ per rank;
    the others must agree), rank 0's rows first. A scalar gathers as one row."""
    del ignore_name_scope
    check_process_set(process_set)
    name = unique_name(name, "allgather")
    return _ops.run(_ops.ALLGATHER, [_for_allgather(tensor)], [name])[0]


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False, process_set=None):
    """Rank `root_rank`'s `tensor` on every rank."""
    del ignore_name_scope
    check_process_set(process_set)
    name = unique_name(name, "broadcast")
    return _ops.run(_ops.BROADCAST, [tensor], [name], root=int(root_rank))[0]


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  process_set=None, ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """This rank's share of `op` over every rank's `tensor` along the first dimension: rows split
    as evenly as possible, the first (rows % size) ranks one more. Runs as an allreduce of the
    whole tensor (it moves allreduce's bytes, not reduce-scatter's half)."""
    del ignore_name_scope
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.rank == 0:
        raise InvalidArgumentError("ringd: reducescatter needs at least one dimension")
    reduced = allreduce(tensor, device_dense=device_dense, compression=compression, op=op,
                        name=unique_name(name, "reducescatter"), process_set=process_set,
                        prescale_factor=prescale_factor, postscale_factor=postscale_factor)
    rows = tensor.shape[0]
    if rows is None:
        rows = tf.shape(tensor)[0]
        size = _runtime.size()
        base, extra = rows // size, rows % size
        rank = _runtime.rank()
        start = rank * base + tf.minimum(rank, extra)
        stop = start + base + tf.cast(rank < extra, rows.dtype)
        return reduced[start:stop]
    start, stop = scatter_rows(rows, _runtime.rank(), _runtime.size())
    return reduced[start:stop]


def barrier(process_set=None):
    """Returns once every rank has called barrier()."""
    check_process_set(process_set)
    allreduce(tf.zeros([1], tf.int32), op=Sum, name=unique_name(None, "barrier"))
