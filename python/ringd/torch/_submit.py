"""The one way ringd.torch hands tensors to the fusion engine: staging (zero-copy for contiguous
CPU tensors, ringd.torch.tensors), submission, and the table of handles that synchronize() and
poll() take. Below the autograd functions (autograd_ops), the public collectives (collectives),
DistributedOptimizer (optimizer) and the torch.distributed backend (process_group), which all
submit through it; it imports none of them, nor DGC's configuration (the caller configures DGC
before it submits a tensor with Compression.dgc).

  start_allreduce / start_broadcast / start_allgather   stage and submit: a Started (the engine's
                                                         handles, and what makes the result)
  allreduce / broadcast / allgather                      the same, registered: a handle for
                                                         synchronize() and poll()
  allreduce_in_place                                     a contiguous CPU tensor straight to the
                                                         engine, no staging and no table (what
                                                         each of a network's gradients can take)
"""

import itertools

import torch

from ringd._runtime import job, name_or_default, op_from_average
from ringd.torch.compression import wire_and_python_compressor
from ringd.torch.tensors import SUPPORTED_DTYPES, bump_version, stage, tensor_from_bytes


class Started:
    """A submission in flight: the engine's handles, and finish(), which makes the result once
    every handle is done."""

    __slots__ = ("handles", "finish")

    def __init__(self, handles, finish):
        self.handles = handles
        self.finish = finish


_handle_map = {}
_next_handle = itertools.count()


def register(started):
    """A handle for synchronize() and poll() of `started`."""
    handle = next(_next_handle)
    _handle_map[handle] = started
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


def start_allreduce(tensors, names, op, wire, in_place, prescale_factor=1.0,
                    postscale_factor=1.0, compressor=None, group=None):
    """Stages `tensors` (in place: the results go back into them) and submits one allreduce each
    under `names`, as one group when `group` names it. finish() returns the list of results."""
    staged = [stage(tensor, name, in_place) for tensor, name in zip(tensors, names)]
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
    if group is not None:
        handles = job().grouped_allreduce(group, names, sent, op, wire)
    else:
        handles = [job().allreduce(name, buffer, op, wire) for name, buffer in zip(names, sent)]

    def finish():
        results = []
        with torch.no_grad():
            for item, wire_tensor, context in zip(staged, sent, contexts):
                if compressor is not None:
                    item.buffer.copy_(compressor.decompress(wire_tensor, context))
                if postscale_factor != 1.0:
                    item.buffer.mul_(postscale_factor)
                results.append(item.result())
        return results

    return Started(handles, finish)


def start_broadcast(tensors, names, root_rank, in_place):
    """Stages and submits one broadcast per tensor; finish() returns the list of results."""
    staged = [stage(tensor, name, in_place) for tensor, name in zip(tensors, names)]
    handles = [job().broadcast(name, item.buffer, root_rank) for name, item in zip(names, staged)]
    return Started(handles, lambda: [item.result() for item in staged])


def start_allgather(tensor, name):
    """Starts concatenating every rank's `tensor` along the first dimension (which may differ per
    rank; the others must agree); finish() returns the new tensor, on the CPU, rank 0's rows
    first."""
    item = stage(tensor, name, in_place=False, needs_copy=False)
    handle = job().allgather(name, item.buffer)
    return Started([handle], lambda: tensor_from_bytes(handle.output(), tensor.dtype,
                                                       handle.output_shape()))


def allreduce(tensors, name, op, average, prescale_factor, postscale_factor, compression,
              in_place, grouped):
    """Stages and submits one allreduce (grouped: one group); returns a handle. DGC must already
    be configured (ringd.torch.dgc.configure): the public layer does it."""
    op = op_from_average(op, average)
    wire, compressor = wire_and_python_compressor(compression)
    group = None
    if grouped:
        group = name_or_default(name, "grouped_allreduce")
        names = [f"{group}.{index}" for index in range(len(tensors))]
    else:
        names = [name_or_default(name, "allreduce")]
    started = start_allreduce(tensors, names, op, wire, in_place, prescale_factor,
                              postscale_factor, compressor, group)
    return register(started) if grouped else _register_one(started)


def broadcast(tensor, root_rank, name, in_place):
    """Stages and submits one broadcast; returns a handle."""
    name = name_or_default(name, "broadcast")
    return _register_one(start_broadcast([tensor], [name], root_rank, in_place))


def _register_one(started):
    """register() for a one-tensor submission: synchronize() returns the tensor, not a list."""
    results = started.finish
    started.finish = lambda: results()[0]
    return register(started)


def allgather(tensor, name):
    """start_allgather() registered: synchronize() returns the new tensor on `tensor`'s device."""
    started = start_allgather(tensor, name_or_default(name, "allgather"))
    gather = started.finish
    if tensor.device.type != "cpu":
        started.finish = lambda: gather().to(tensor.device)
    return register(started)


class InPlace:
    """An allreduce_in_place() in flight; wait() completes it (see wait())."""

    __slots__ = ("core", "tensor")

    def __init__(self, core, tensor):
        self.core = core
        self.tensor = tensor

    def wait(self):
        self.core.wait()  # releases the GIL; Ctrl-C interrupts; raises the RingdError
        bump_version(self.tensor)


def takes_in_place(tensor):
    """Whether allreduce_in_place() can take `tensor`: contiguous, on the CPU, of a dtype the
    engine reduces."""
    return (tensor.device.type == "cpu" and tensor.dtype in SUPPORTED_DTYPES
            and tensor.layout == torch.strided and tensor.is_contiguous())


def allreduce_in_place(tensor, name, op, wire):
    """Submits `tensor` (takes_in_place) to the engine as it is, reduced into its own memory:
    no staging, no handle table, which cost more than the engine's submission for each of a
    network's hundreds of gradients. Python-side compressors and scale factors need allreduce()."""
    bump_version(tensor)  # at submission and at the end, as in-place staging does
    return InPlace(job().allreduce(name, tensor.detach(), op, wire), tensor)


def wait(handle):
    """Waits for an allreduce_in_place() (InPlace) or a registered handle (synchronize())."""
    if isinstance(handle, InPlace):
        handle.wait()
        return None
    return synchronize(handle)
