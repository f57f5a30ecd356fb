"""Python objects across the ranks, pickled into byte tensors (broadcast_object, allgather_object;
ringd.torch.functions re-exports them). Stands on _submit alone, so that what configures the
engine (dgc) can agree on its settings without the public collectives."""

import pickle

import torch

from ringd import _runtime
from ringd._runtime import name_or_default
from ringd.collectives import pickled, unpickled_rows
from ringd.torch import _submit


def _to_bytes_tensor(obj):
    return torch.from_numpy(pickled(obj))


def broadcast_object(obj, root_rank=0, name=None):
    """Returns rank root_rank's `obj` (pickled) on every rank."""
    name = name_or_default(name, "broadcast_object")
    payload = _to_bytes_tensor(obj) if _runtime.rank() == root_rank else None
    length = torch.tensor([0 if payload is None else payload.numel()], dtype=torch.int64)
    _submit.synchronize(_submit.broadcast(length, root_rank, f"{name}.length", in_place=True))
    if payload is None:
        payload = torch.empty(int(length[0]), dtype=torch.uint8)
    _submit.synchronize(_submit.broadcast(payload, root_rank, name, in_place=True))
    return pickle.loads(payload.numpy().tobytes())


def allgather_object(obj, name=None):
    """Returns every rank's `obj` (pickled), as a list in rank order."""
    name = name_or_default(name, "allgather_object")
    payload = _to_bytes_tensor(obj)
    lengths = _submit.synchronize(
        _submit.allgather(torch.tensor([payload.numel()], dtype=torch.int64), f"{name}.lengths"))
    gathered = _submit.synchronize(_submit.allgather(payload, name)).numpy()
    return unpickled_rows(gathered, lengths.tolist())
