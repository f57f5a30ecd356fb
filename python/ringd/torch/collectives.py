"""Horovod's collectives over torch tensors (horovod.torch.mpi_ops), on ringd's fusion engine.

The *_async calls return an integer handle for synchronize(handle) (the result) and poll(handle);
the plain calls wait. Names the caller does not give are generated per kind in call order
("allreduce.noname.0", ...): ranks must make their unnamed calls in the same order, as in
Horovod. Tensors: see ringd.torch.tensors (zero-copy for contiguous CPU tensors). The layers:
this module (the public calls, DGC's configuration) over autograd_ops (the differentiable forms)
over _submit (staging, submission, the handle table).
"""

import torch

from ringd import _runtime
from ringd._runtime import Average, Sum, name_or_default, op_from_average
from ringd.collectives import scatter_rows
from ringd.torch import _submit, dgc
from ringd.torch._submit import poll, synchronize
from ringd.torch.autograd_ops import AllgatherFunction, AllreduceFunction, BroadcastFunction
from ringd.torch.compression import Compression, dgc_compressor


def _configure_dgc(compression):
    """Compression.dgc's settings reach the engine (once per job) before its first tensor."""
    wanted_dgc = dgc_compressor(compression)
    if wanted_dgc is not None:
        dgc.configure(wanted_dgc)


def _allreduce(tensors, name, op, average, prescale_factor, postscale_factor, compression,
               in_place, grouped):
    _configure_dgc(compression)
    return _submit.allreduce(tensors, name, op, average, prescale_factor, postscale_factor,
                             compression, in_place, grouped)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=None, compression=Compression.none):
    """Starts reducing `tensor` in place across the ranks; returns a handle."""
    return _allreduce([tensor], name, op, average, prescale_factor, postscale_factor,
                             compression, in_place=True, grouped=False)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=None, compression=Compression.none):
    """Starts reducing a copy of `tensor`; synchronize() returns the new tensor."""
    return _allreduce([tensor], name, op, average, prescale_factor, postscale_factor,
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
        _configure_dgc(compression)
        return AllreduceFunction.apply(tensor, name, op, prescale_factor, postscale_factor,
                                       compression)
    return synchronize(allreduce_async(tensor, None, name, op, prescale_factor, postscale_factor,
                                       process_set, compression))


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=None, compression=Compression.none):
    """Starts reducing every tensor in place as one group: none of them runs before all of them
    are ready on every rank. synchronize() returns the list."""
    return _allreduce(list(tensors), name, op, average, prescale_factor, postscale_factor,
                             compression, in_place=True, grouped=True)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=None, compression=Compression.none):
    return _allreduce(list(tensors), name, op, average, prescale_factor, postscale_factor,
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


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    """Starts overwriting `tensor` in place with rank root_rank's; returns a handle."""
    return _submit.broadcast(tensor, root_rank, name, in_place=True)


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    return _submit.broadcast(tensor, root_rank, name, in_place=False)


def broadcast_(tensor, root_rank, name=None, process_set=None):
    return synchronize(broadcast_async_(tensor, root_rank, name))


def broadcast(tensor, root_rank, name=None, process_set=None):
    """Returns rank root_rank's `tensor` as a new tensor. Differentiable: the root's gradient is
    the sum of every rank's, the others' zero."""
    name = name_or_default(name, "broadcast")
    if tensor.requires_grad and torch.is_grad_enabled():
        return BroadcastFunction.apply(tensor, root_rank, name)
    return synchronize(broadcast_async(tensor, root_rank, name))


def allgather_async(tensor, name=None, process_set=None):
    """Starts concatenating every rank's `tensor` along the first dimension (which may differ per
    rank; the others must agree); synchronize() returns the new tensor, rank 0's rows first."""
    return _submit.allgather(tensor, name)


def allgather(tensor, name=None, process_set=None):
    """Every rank's `tensor` concatenated along the first dimension. Differentiable: each rank's
    gradient is the sum over ranks of the gradient of its rows."""
    name = name_or_default(name, "allgather")
    if tensor.requires_grad and torch.is_grad_enabled():
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
