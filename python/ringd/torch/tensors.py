"""torch tensors as the engine sees them: contiguous CPU memory of a dtype ringd reduces.

  * a contiguous CPU tensor is handed over as it is (zero-copy, through DLPack);
  * a non-contiguous one is copied into a contiguous buffer, and for the in-place calls the result
    is copied back when the operation is synchronized;
  * a tensor on another device (CUDA) is staged through host memory (pinned when CUDA is
    available): copied to the host before the collective and back to the device after it. This
    path is simple — synchronous copies, no overlap; tests/python/test_torch_cuda.py checks it
    where torch sees a GPU (it passed on an H100 with torch 2.11; CI has no GPU and skips it).

In-place results bump the tensor's autograd version counter (at submission and again at
completion), so autograd refuses a backward pass that would use values saved before the
collective overwrote them, instead of silently using the new ones.
"""

import torch

SUPPORTED_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                    torch.int64, torch.uint8)
_SUPPORTED_NAMES = "float32, float64, float16, bfloat16, int32, int64, uint8"


def check_tensor(tensor, name):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"ringd: tensor '{name}': expected a torch.Tensor, got "
                        f"{type(tensor).__name__}")
    if tensor.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"ringd: tensor '{name}' has dtype {tensor.dtype}, which ringd does not "
                        f"reduce; convert it to one of {_SUPPORTED_NAMES}")
    if tensor.layout != torch.strided:
        raise TypeError(f"ringd: tensor '{name}' has layout {tensor.layout}; ringd reduces dense "
                        "tensors only (call .to_dense())")


def bump_version(tensor):
    torch.autograd.graph.increment_version(tensor)


class Staged:
    """One tensor on its way through a collective: `buffer` is what the engine reads and writes
    (contiguous, CPU); result() is what the caller gets back once the collective is done."""

    __slots__ = ("tensor", "buffer", "in_place")

    def __init__(self, tensor, buffer, in_place):
        self.tensor = tensor
        self.buffer = buffer
        self.in_place = in_place

    def zero_copy(self):
        return self.buffer.data_ptr() == self.tensor.data_ptr() and self.tensor.device.type == "cpu"

    def result(self):
        """The caller's tensor holding the result (in place), or a new tensor on its device."""
        if not self.in_place:
            if self.tensor.device.type == "cpu":
                return self.buffer
            return self.buffer.to(self.tensor.device)
        if self.zero_copy():
            bump_version(self.tensor)
        else:
            with torch.no_grad():
                self.tensor.copy_(self.buffer)
        return self.tensor


def stage(tensor, name, in_place, needs_copy=None):
    """Prepares `tensor` for a collective. in_place: the result goes back into it. needs_copy
    (default: not in_place): the collective must not write the caller's memory."""
    check_tensor(tensor, name)
    if needs_copy is None:
        needs_copy = not in_place
    data = tensor.detach()
    if data.device.type != "cpu":
        host = torch.empty(data.shape, dtype=data.dtype, pin_memory=torch.cuda.is_available())
        host.copy_(data)
        return Staged(tensor, host, in_place)
    if data.is_contiguous() and not needs_copy:
        if in_place:
            bump_version(tensor)
        return Staged(tensor, data, in_place)
    return Staged(tensor, data.clone(memory_format=torch.contiguous_format), in_place)


def tensor_from_bytes(flat_uint8, dtype, shape):
    """A tensor of `dtype` and `shape` over a flat uint8 NumPy array's memory (no copy)."""
    flat = torch.from_numpy(flat_uint8)
    if dtype != torch.uint8:
        flat = flat.view(dtype)
    return flat.reshape(shape)
