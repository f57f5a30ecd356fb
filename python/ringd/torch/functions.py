"""Making replicas agree: parameters, optimizer state and arbitrary Python objects from one rank
to all, and objects from every rank to all (horovod.torch.functions)."""

import torch

from ringd import _runtime
from ringd.torch import collectives
# Python objects travel as pickled bytes, the same for every framework (ringd.collectives).
from ringd.collectives import allgather_object, broadcast_object  # noqa: F401 (public)
from ringd.torch.tensors import SUPPORTED_DTYPES


def broadcast_parameters(params, root_rank=0, prefix="broadcast_parameters"):
    """Overwrites every tensor of `params` in place with rank root_rank's: a state_dict(), or
    (name, tensor) pairs such as model.named_parameters(). All in flight at once (fused)."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        items = list(params)
    handles = []
    for name, tensor in items:
        if tensor is None:
            continue
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"ringd: broadcast_parameters: '{name}' is a {type(tensor).__name__}, "
                            "not a tensor (use broadcast_object for other values)")
        handles.append(collectives.broadcast_async_(tensor, root_rank, name=f"{prefix}.{name}"))
    for handle in handles:
        collectives.synchronize(handle)


class _TensorSlot:
    """Where a broadcast tensor goes back into a state dict."""

    def __init__(self, index, shape, dtype):
        self.index = index
        self.shape = shape
        self.dtype = dtype


def _take_tensors(value, tensors):
    """`value` with each tensor ringd can broadcast replaced by a _TensorSlot (appended to
    `tensors`); other tensors stay, to travel pickled."""
    if isinstance(value, torch.Tensor) and value.dtype in SUPPORTED_DTYPES and value.layout == \
            torch.strided:
        tensors.append(value)
        return _TensorSlot(len(tensors) - 1, tuple(value.shape), value.dtype)
    if isinstance(value, dict):
        return {key: _take_tensors(item, tensors) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_take_tensors(item, tensors) for item in value)
    return value


def _put_tensors(value, tensors):
    if isinstance(value, _TensorSlot):
        return tensors[value.index]
    if isinstance(value, dict):
        return {key: _put_tensors(item, tensors) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_put_tensors(item, tensors) for item in value)
    return value


def _slots(value):
    if isinstance(value, _TensorSlot):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _slots(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _slots(item)


def broadcast_optimizer_state(optimizer, root_rank=0, prefix="broadcast_optimizer_state"):
    """Makes every rank's optimizer state (and hyperparameters: its param_groups) rank
    root_rank's. The structure and the scalars travel pickled (broadcast_object), the tensors as
    tensors; the other ranks then load_state_dict() it, so their optimizer may have no state yet
    (before the first step), as in Horovod."""
    root = _runtime.rank() == root_rank
    tensors = []
    skeleton = _take_tensors(optimizer.state_dict(), tensors) if root else None
    skeleton = broadcast_object(skeleton, root_rank, name=f"{prefix}.structure")
    if not root:
        slots = sorted(_slots(skeleton), key=lambda slot: slot.index)
        tensors = [torch.empty(slot.shape, dtype=slot.dtype) for slot in slots]
    handles = [collectives.broadcast_async_(tensor, root_rank, name=f"{prefix}.{index}")
               for index, tensor in enumerate(tensors)]
    for handle in handles:
        collectives.synchronize(handle)
    if not root:
        optimizer.load_state_dict(_put_tensors(skeleton, tensors))


