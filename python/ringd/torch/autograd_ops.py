"""The differentiable forms of allreduce, broadcast and allgather (what the plain calls use when
the input requires grad). Backward passes are collectives too, named after the forward's
tensor ("<name>.grad"), so every rank must run them, as in Horovod. They submit through _submit,
below them; the public collectives, above, call them."""

import torch

from ringd import _runtime
from ringd._runtime import Average, Sum
from ringd.torch.compression import Compression
from ringd.torch import _submit


def _sum(tensor, name):
    return _submit.synchronize(_submit.allreduce(
        [tensor], name, Sum, None, 1.0, 1.0, Compression.none, in_place=False, grouped=False))


class AllreduceFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, compression):
        ctx.name = name
        ctx.op = op
        ctx.factors = (prescale_factor, postscale_factor)
        ctx.compression = compression
        return _submit.synchronize(_submit.allreduce(
            [tensor], name, op, None, prescale_factor, postscale_factor, compression,
            in_place=False, grouped=False))

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.op not in (Average, Sum):
            raise NotImplementedError(
                f"ringd: allreduce '{ctx.name}' with op {ctx.op} has no gradient (only Sum and "
                "Average do)")
        grad = _submit.synchronize(_submit.allreduce(
            [grad_output], ctx.name + ".grad", ctx.op, None, *ctx.factors, ctx.compression,
            in_place=False, grouped=False))
        return grad, None, None, None, None, None


class BroadcastFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.name = name
        ctx.root_rank = root_rank
        return _submit.synchronize(_submit.broadcast(tensor, root_rank, name, in_place=False))

    @staticmethod
    def backward(ctx, grad_output):
        grad = _sum(grad_output, ctx.name + ".grad")
        if _runtime.rank() != ctx.root_rank:
            grad.zero_()
        return grad, None, None


class AllgatherFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        ctx.name = name
        rows = torch.tensor([tensor.shape[0] if tensor.dim() else 1], dtype=torch.int64)
        ctx.rows = _submit.synchronize(_submit.allgather(rows, name + ".rows"))
        return _submit.synchronize(_submit.allgather(tensor, name))

    @staticmethod
    def backward(ctx, grad_output):
        grad = _sum(grad_output, ctx.name + ".grad")
        rank = _runtime.rank()
        start = int(ctx.rows[:rank].sum())
        return grad[start:start + int(ctx.rows[rank])], None
