"""The one way ringd.torch hands tensors to the fusion engine: staging (zero-copy for contiguous
CPU tensors, ringd.torch.tensors), submission, and the table of handles that synchronize() and
poll() take. Below the autograd functions (autograd_ops) and the public collectives
(collectives), which both use it; it imports neither, nor DGC's configuration (the public layer
configures DGC before it submits)."""

import itertools

import torch

from ringd._runtime import job, name_or_default, op_from_average
from ringd.torch.compression import wire_and_python_compressor
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


def allreduce(tensors, name, op, average, prescale_factor, postscale_factor, compression,
              in_place, grouped):
    """Stages and submits one allreduce (grouped: one group); returns a handle. DGC must already
    be configured (ringd.torch.dgc.configure): the public layer does it."""
    op = op_from_average(op, average)
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


def broadcast(tensor, root_rank, name, in_place):
    """Stages and submits one broadcast; returns a handle."""
    name = name_or_default(name, "broadcast")
    item = stage(tensor, name, in_place)
    handle = job().broadcast(name, item.buffer, root_rank)
    return _register([handle], item.result)


def allgather(tensor, name):
    """Starts concatenating every rank's `tensor` along the first dimension (which may differ per
    rank; the others must agree); synchronize() returns the new tensor, rank 0's rows first."""
    name = name_or_default(name, "allgather")
    item = stage(tensor, name, in_place=False, needs_copy=False)
    handle = job().allgather(name, item.buffer)

    def finish():
        gathered = tensor_from_bytes(handle.output(), tensor.dtype, handle.output_shape())
        return gathered if tensor.device.type == "cpu" else gathered.to(tensor.device)

    return _register([handle], finish)
