"""Compression of allreduced tensors on the wire, with Horovod's names (Compression.none, .fp16,
.bf16). ringd compresses inside the engine: float32 tensors travel as 16-bit floats and every
combining step widens to float32, combines and rounds once (Horovod casts the tensor itself to
fp16 before a 16-bit sum). Other dtypes travel as they are."""


class Compressor:
    """A compression: `wire` is the engine's name for it ("": the engine's default,
    RINGD_COMPRESSION, which is none unless set)."""

    wire = ""


class NoneCompressor(Compressor):
    wire = ""


class FP16Compressor(Compressor):
    wire = "fp16"


class BF16Compressor(Compressor):
    wire = "bf16"


class Compression:
    """Optional gradient compression algorithms used during allreduce."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor


def wire(compression):
    """The engine's compression for `compression` (None, a Compression member, or a name)."""
    if compression is None:
        return ""
    if isinstance(compression, str):
        return compression
    name = getattr(compression, "wire", None)
    if name is None:
        raise TypeError(f"ringd.tensorflow: compression={compression!r} is not one of "
                        "Compression.none, Compression.fp16, Compression.bf16")
    return name
