"""The differentiable forms of allreduce, broadcast and allgather (what the plain calls use when
the input requires grad). Backward passes are collectives too, named after the forward's
tensor ("<name>.grad"), so every rank must run them, as in Horovod."""

import torch

from ringd import _runtime
from ringd._runtime import Average, Sum
from ringd.torch import collectives


class AllreduceFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, compression):
        ctx.name = name
        ctx.op = op
        ctx.factors = (prescale_factor, postscale_factor)
        ctx.compression = compression
        return collectives.synchronize(collectives.allreduce_async(
            tensor, None, name, op, prescale_factor, postscale_factor, compression=compression))

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.op not in (Average, Sum):
            raise NotImplementedError(
                f"ringd: allreduce '{ctx.name}' with op {ctx.op} has no gradient (only Sum and "
                "Average do)")
        grad = collectives.synchronize(collectives.allreduce_async(
            grad_output, None, ctx.name + ".grad", ctx.op, *ctx.factors,
            compression=ctx.compression))
        return grad, None, None, None, None, None


class BroadcastFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.name = name
        ctx.root_rank = root_rank
        return collectives.synchronize(collectives.broadcast_async(tensor, root_rank, name))

    @staticmethod
    def backward(ctx, grad_output):
        grad = collectives.synchronize(
            collectives.allreduce_async(grad_output, None, ctx.name + ".grad", Sum))
        if _runtime.rank() != ctx.root_rank:
            grad.zero_()
        return grad, None, None


class AllgatherFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        ctx.name = name
        rows = torch.tensor([tensor.shape[0] if tensor.dim() else 1], dtype=torch.int64)
        ctx.rows = collectives.synchronize(collectives.allgather_async(rows, name + ".rows"))
        return collectives.synchronize(collectives.allgather_async(tensor, name))

    @staticmethod
    def backward(ctx, grad_output):
        grad = collectives.synchronize(
            collectives.allreduce_async(grad_output, None, ctx.name + ".grad", Sum))
        rank = _runtime.rank()
        start = int(ctx.rows[:rank].sum())
        return grad[start:start + int(ctx.rows[rank])], None
