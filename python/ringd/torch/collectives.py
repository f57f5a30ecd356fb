"""Horovod's collectives over torch tensors (horovod.torch.mpi_ops), on ringd's fusion engine.

The *_async calls return an integer handle for synchronize(handle) (the result) and poll(handle);
the plain calls wait. Names the caller does not give are generated per kind in call order
("allreduce.noname.0", ...): ranks must make their unnamed calls in the same order, as in
Horovod. Tensors: see ringd.torch.tensors (zero-copy for contiguous CPU tensors).
"""

import itertools

import torch

from ringd import _runtime
from ringd._runtime import Average, Sum, job, name_or_default, op_from_average
from ringd.collectives import scatter_rows
from ringd.torch import dgc
from ringd.torch.compression import Compression, dgc_compressor, wire_and_python_compressor
from ringd.torch.tensors import stage, tensor_from_bytes


class _Pending:
    """What synchronize() waits for (ringd.Handles) and then calls to make the result."""

    __slots__ = ("handles", "finish")

    def __init__(self, handles, finish):
        self.handles = handles
        self.finish = finish


_handle_map = {}
_next_handle = itertools.count()


def _register(handles, finish):
    handle = next(_next_handle)
    _handle_map[handle] = _Pending(handles, finish)
    return handle


def _pending(handle):
    try:
        return _handle_map[handle]
    except KeyError:
        raise ValueError(f"ringd.torch: handle {handle!r} is unknown or already synchronized"
                         ) from None


def synchronize(handle):
    """Waits for the operation (Ctrl-C interrupts; the handle stays valid) and returns its
    output; raises the RingdError it failed with."""
    pending = _pending(handle)
    try:
        for core_handle in pending.handles:
            core_handle.wait()
    except KeyboardInterrupt:
        raise
    except BaseException:
        del _handle_map[handle]
        raise
    del _handle_map[handle]
    return pending.finish()


def poll(handle):
    """True once synchronize(handle) would return without waiting."""
    return all(core_handle.done() for core_handle in _pending(handle).handles)


# --- allreduce ----------------------------------------------------------------------------------


def _submit_allreduce(tensors, name, op, average, prescale_factor, postscale_factor, compression,
                      in_place, grouped):
    op = op_from_average(op, average)
    wanted_dgc = dgc_compressor(compression)
    if wanted_dgc is not None:
        dgc.configure(wanted_dgc)
    wire, compressor = wire_and_python_compressor(compression)
    if grouped:
        group = name_or_default(name, "grouped_allreduce")
        names = [f"{group}.{index}" for index in range(len(tensors))]
    else:
        names = [name_or_default(name, "allreduce")]
    staged = [stage(tensor, tensor_name, in_place) for tensor, tensor_name in zip(tensors, names)]
    sent = []
    contexts = []
    with torch.no_grad():
        for item in staged:
            if prescale_factor != 1.0:
                item.buffer.mul_(prescale_factor)
            if compressor is None:
                sent.append(item.buffer)
                contexts.append(None)
            else:
                compressed, context = compressor.compress(item.buffer)
                sent.append(compressed.detach().contiguous())
                contexts.append(context)
    if grouped:
        handles = job().grouped_allreduce(group, names, sent, op, wire)
    else:
        handles = [job().allreduce(names[0], sent[0], op, wire)]

    def finish():
        results = []
        with torch.no_grad():
            for item, wire_tensor, context in zip(staged, sent, contexts):
                if compressor is not None:
                    item.buffer.copy_(compressor.decompress(wire_tensor, context))
                if postscale_factor != 1.0:
                    item.buffer.mul_(postscale_factor)
                results.append(item.result())
        return results if grouped else results[0]

    return _register(handles, finish)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=None, compression=Compression.none):
    """Starts reducing `tensor` in place across the ranks; returns a handle."""
    return _submit_allreduce([tensor], name, op, average, prescale_factor, postscale_factor,
                             compression, in_place=True, grouped=False)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=None, compression=Compression.none):
    """Starts reducing a copy of `tensor`; synchronize() returns the new tensor."""
    return _submit_allreduce([tensor], name, op, average, prescale_factor, postscale_factor,
                             compression, in_place=False, grouped=False)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=None, compression=Compression.none):
    """Reduces `tensor` in place and returns it (its autograd version counter moves on)."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set, compression))


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """Returns op over every rank's `tensor` (default op: Average) as a new tensor. Differentiable
    for Sum and Average: the gradient is allreduced with the same op (and factors)."""
    op = op_from_average(op, average)
    name = name_or_default(name, "allreduce")
    if tensor.requires_grad and torch.is_grad_enabled():
        from ringd.torch.autograd_ops import AllreduceFunction
        return AllreduceFunction.apply(tensor, name, op, prescale_factor, postscale_factor,
                                       compression)
    return synchronize(allreduce_async(tensor, None, name, op, prescale_factor, postscale_factor,
                                       process_set, compression))


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=None, compression=Compression.none):
    """Starts reducing every tensor in place as one group: none of them runs before all of them
    are ready on every rank. synchronize() returns the list."""
    return _submit_allreduce(list(tensors), name, op, average, prescale_factor, postscale_factor,
                             compression, in_place=True, grouped=True)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=None, compression=Compression.none):
    return _submit_allreduce(list(tensors), name, op, average, prescale_factor, postscale_factor,
                             compression, in_place=False, grouped=True)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=None, compression=Compression.none):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set, compression))


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    return synchronize(grouped_allreduce_async(tensors, average, name, op, prescale_factor,
                                               postscale_factor, process_set, compression))


# --- broadcast, allgather, reducescatter, barrier -----------------------------------------------


def _submit_broadcast(tensor, root_rank, name, in_place):
    name = name_or_default(name, "broadcast")
    item = stage(tensor, name, in_place)
    handle = job().broadcast(name, item.buffer, root_rank)
    return _register([handle], item.result)


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    """Starts overwriting `tensor` in place with rank root_rank's; returns a handle."""
    return _submit_broadcast(tensor, root_rank, name, in_place=True)


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    return _submit_broadcast(tensor, root_rank, name, in_place=False)


def broadcast_(tensor, root_rank, name=None, process_set=None):
    return synchronize(broadcast_async_(tensor, root_rank, name))


def broadcast(tensor, root_rank, name=None, process_set=None):
    """Returns rank root_rank's `tensor` as a new tensor. Differentiable: the root's gradient is
    the sum of every rank's, the others' zero."""
    name = name_or_default(name, "broadcast")
    if tensor.requires_grad and torch.is_grad_enabled():
        from ringd.torch.autograd_ops import BroadcastFunction
        return BroadcastFunction.apply(tensor, root_rank, name)
    return synchronize(broadcast_async(tensor, root_rank, name))


def allgather_async(tensor, name=None, process_set=None):
    """Starts concatenating every rank's `tensor` along the first dimension (which may differ per
    rank; the others must agree); synchronize() returns the new tensor, rank 0's rows first."""
    name = name_or_default(name, "allgather")
    item = stage(tensor, name, in_place=False, needs_copy=False)
    handle = job().allgather(name, item.buffer)

    def finish():
        gathered = tensor_from_bytes(handle.output(), tensor.dtype, handle.output_shape())
        return gathered if tensor.device.type == "cpu" else gathered.to(tensor.device)

    return _register([handle], finish)


def allgather(tensor, name=None, process_set=None):
    """Every rank's `tensor` concatenated along the first dimension. Differentiable: each rank's
    gradient is the sum over ranks of the gradient of its rows."""
    name = name_or_default(name, "allgather")
    if tensor.requires_grad and torch.is_grad_enabled():
        from ringd.torch.autograd_ops import AllgatherFunction
        return AllgatherFunction.apply(tensor, name)
    return synchronize(allgather_async(tensor, name))


def reducescatter(tensor, op=Average, name=None, process_set=None, compression=Compression.none):
    """This rank's share of op over every rank's `tensor`, split along the first dimension as
    evenly as possible (the first rows % size ranks get one row more). ringd's engine has no
    reduce-scatter: this is an allreduce of the whole tensor, then this rank's slice, so it moves
    allreduce's bytes (twice reduce-scatter's)."""
    if tensor.dim() == 0:
        raise _runtime.InvalidArgumentError(
            f"ringd: reducescatter of tensor '{name}' needs at least one dimension")
    name = name_or_default(name, "reducescatter")
    reduced = synchronize(allreduce_async(tensor, None, name, op, compression=compression))
    start, stop = scatter_rows(tensor.shape[0], _runtime.rank(), _runtime.size())
    return reduced[start:stop].clone()


def barrier(process_set=None):
    """Returns once every rank has called barrier()."""
    synchronize(allreduce_async_(torch.zeros(1, dtype=torch.int32), op=Sum,
                                 name=name_or_default(None, "barrier")))
