"""ringd's collectives on NumPy arrays (and anything else with DLPack or the buffer protocol):
the framework-neutral half of the Horovod-style API. ringd.torch is the same over torch tensors.

In place and zero-copy where the name ends in "_" (the array must be C-contiguous and writable;
ringd writes the result into it); the others copy the input first and return a new array.
The *_async variants return a ringd.Handle for synchronize() / poll().
"""

import io
import pickle

import numpy as np

from ringd import _runtime
from ringd._runtime import Average, job, name_or_default, op_from_average


def allreduce_async_(array, op=None, name=None, compression=None, average=None):
    """Starts reducing `array` in place across the ranks; returns a Handle."""
    op = op_from_average(op, average)
    name = name_or_default(name, "allreduce")
    return job().allreduce(name, array, op, _wire(compression))


def allreduce_async(array, op=None, name=None, compression=None, average=None):
    return allreduce_async_(np.array(array, order="C", copy=True), op, name, compression, average)


def allreduce_(array, op=None, name=None, compression=None, average=None):
    return synchronize(allreduce_async_(array, op, name, compression, average))


def allreduce(array, op=None, name=None, compression=None, average=None):
    return synchronize(allreduce_async(array, op, name, compression, average))


def grouped_allreduce_async_(arrays, op=None, name=None, compression=None):
    """Starts reducing every array of `arrays` in place as one group (none runs before all are
    ready on every rank); returns a list of Handles."""
    op = op_from_average(op, None)
    group = name_or_default(name, "grouped_allreduce")
    names = [f"{group}.{index}" for index in range(len(arrays))]
    return job().grouped_allreduce(group, names, list(arrays), op, _wire(compression))


def grouped_allreduce_(arrays, op=None, name=None, compression=None):
    return [synchronize(handle) for handle in grouped_allreduce_async_(arrays, op, name,
                                                                       compression)]


def grouped_allreduce(arrays, op=None, name=None, compression=None):
    copies = [np.array(array, order="C", copy=True) for array in arrays]
    return grouped_allreduce_(copies, op, name, compression)


def broadcast_async_(array, root_rank=0, name=None):
    """Starts overwriting `array` in place with rank `root_rank`'s; returns a Handle."""
    return job().broadcast(name_or_default(name, "broadcast"), array, root_rank)


def broadcast_async(array, root_rank=0, name=None):
    return broadcast_async_(np.array(array, order="C", copy=True), root_rank, name)


def broadcast_(array, root_rank=0, name=None):
    return synchronize(broadcast_async_(array, root_rank, name))


def broadcast(array, root_rank=0, name=None):
    return synchronize(broadcast_async(array, root_rank, name))


def allgather_async(array, name=None):
    """Starts concatenating every rank's `array` along the first dimension (which may differ per
    rank; the others must agree); synchronize() returns the new array."""
    array = np.ascontiguousarray(array)
    return job().allgather(name_or_default(name, "allgather"), array)


def allgather(array, name=None):
    return synchronize(allgather_async(array, name))


def reducescatter(array, op=Average, name=None):
    """This rank's share of the reduction along the first dimension: rows split as evenly as
    possible, the first (rows % size) ranks one row more. Runs as an allreduce of the whole array
    (it moves allreduce's bytes, not reduce-scatter's half)."""
    array = np.asarray(array)
    if array.ndim == 0:
        raise _runtime.InvalidArgumentError("ringd: reducescatter needs at least one dimension")
    reduced = allreduce(array, op=op, name=name_or_default(name, "reducescatter"))
    start, stop = scatter_rows(array.shape[0], _runtime.rank(), _runtime.size())
    return reduced[start:stop].copy()


def barrier():
    """Returns once every rank has called barrier()."""
    allreduce_(np.zeros(1, np.int32), op=_runtime.Sum, name=name_or_default(None, "barrier"))


def synchronize(handle):
    """Waits for `handle` (Ctrl-C interrupts) and returns its result: the array written in place,
    or allgather's new array. Raises the RingdError the operation failed with."""
    array = handle.wait()
    if handle.kind == "allgather":
        return handle.output().view(array.dtype).reshape(handle.output_shape())
    return array


def poll(handle):
    """True once `handle` is done (synchronize() then returns without waiting)."""
    return handle.done()


def _pickled(obj):
    """`obj` pickled, as a uint8 array."""
    buffer = io.BytesIO()
    pickle.dump(obj, buffer, protocol=pickle.HIGHEST_PROTOCOL)
    return np.frombuffer(buffer.getbuffer(), dtype=np.uint8).copy()


def _unpickled_rows(gathered, lengths):
    """The objects pickled one after another in the uint8 array `gathered`, `lengths` bytes each."""
    objects = []
    offset = 0
    for length in lengths:
        objects.append(pickle.loads(gathered[offset:offset + length].tobytes()))
        offset += length
    return objects


def broadcast_object(obj, root_rank=0, name=None):
    """Rank root_rank's `obj` (pickled) on every rank (ringd.torch's and ringd.tensorflow's
    broadcast_object too)."""
    name = name_or_default(name, "broadcast_object")
    payload = _pickled(obj) if _runtime.rank() == root_rank else None
    length = np.array([0 if payload is None else payload.size], dtype=np.int64)
    broadcast_(length, root_rank, f"{name}.length")
    if payload is None:
        payload = np.empty(int(length[0]), dtype=np.uint8)
    broadcast_(payload, root_rank, name)
    return pickle.loads(payload.tobytes())


def allgather_object(obj, name=None):
    """Every rank's `obj` (pickled), as a list in rank order."""
    name = name_or_default(name, "allgather_object")
    payload = _pickled(obj)
    lengths = allgather(np.array([payload.size], dtype=np.int64), f"{name}.lengths")
    return _unpickled_rows(allgather(payload, name), lengths.tolist())


def scatter_rows(rows, rank, size):
    """[start, stop) of rank's rows when `rows` are split over `size` ranks as evenly as
    possible, the first ranks taking one more."""
    base, extra = divmod(rows, size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def _wire(compression):
    """None, a name ("none", "fp16", "bf16"), or a Compression class with `wire`."""
    if compression is None or isinstance(compression, str):
        return compression
    return getattr(compression, "wire", None)
