"""Horovod's Compression namespace for ringd.torch.

ringd compresses on the wire, inside the engine: with fp16 or bf16 a fused float32 buffer travels
as 16-bit floats and every combining step widens to float32, combines and rounds once
(include/ringd/engine.h, Compression). So the built-in compressors do nothing to the tensor in
Python; they name the wire format (`wire`). Tensors of other dtypes travel as they are. A
compressor of your own (any class with compress(tensor) -> (tensor, ctx) and
decompress(tensor, ctx) -> tensor, as in Horovod, and no `wire`) runs in Python around an
uncompressed allreduce.
"""


class Compressor:
    """Interface of a compressor; `wire` is the engine's compression (None: the engine's default,
    RINGD_COMPRESSION, itself none unless set)."""

    wire = None

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class NoneCompressor(Compressor):
    """No compression asked for (the engine's default applies: RINGD_COMPRESSION)."""

    wire = None


class FP16Compressor(Compressor):
    """float32 travels as IEEE half precision."""

    wire = "fp16"


class BF16Compressor(Compressor):
    """float32 travels as bfloat16 (float32's range, 8 bits of mantissa)."""

    wire = "bf16"


class Compression:
    """The compressors by name, as Horovod has them (plus bf16)."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor


def wire_and_python_compressor(compression):
    """(the engine's compression name or None, a Python-side compressor or None)."""
    if compression is None:
        return None, None
    if isinstance(compression, str):
        return compression, None
    if hasattr(compression, "wire"):
        return compression.wire, None
    return None, compression
