"""Horovod's Compression namespace for ringd.torch.

ringd compresses on the wire, inside the engine: with fp16 or bf16 a fused float32 buffer travels
as 16-bit floats and every combining step widens to float32, combines and rounds once
(include/ringd/engine.h, Compression). So the built-in compressors do nothing to the tensor in
Python; they name the wire format (`wire`). Tensors of other dtypes travel as they are. A
compressor of your own (any class with compress(tensor) -> (tensor, ctx) and
decompress(tensor, ctx) -> tensor, as in Horovod, and no `wire`) runs in Python around an
uncompressed allreduce.

Compression.dgc(...) is deep gradient compression (Lin et al., ICLR 2018), also in the engine:
see DGCCompressor.
"""

import math


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


class DGCCompressor(Compressor):
    """Deep gradient compression (Lin et al., "Deep Gradient Compression", ICLR 2018), run by the
    engine on float32 allreduces (include/ringd/dgc.h; docs/architecture.md has the algorithm).
    Each rank adds its gradient into a velocity u = m u + g (momentum correction) and a residual
    v += u, sends only the largest (1 - sparsity) share of v as (index, value) pairs, and keeps
    the rest for later steps; what comes back is the average of the pairs every rank sent (zero
    elsewhere), to be applied by plain SGD. Tensors of fewer than min_sparse_elements elements,
    or where pairs would cost more than the dense ring, travel dense (u + v, momentum kept).

    With DistributedOptimizer the momentum moves into the compressor: momentum=None (default)
    takes the wrapped SGD's momentum and sets the optimizer's to 0 (an optimizer without one, such
    as Adam, gets 0: plain accumulation). Elsewhere None means 0.9. warmup_epochs: the paper's
    sparsity ramp (75%, 93.75%, 98.4%, 99.6% ...) over the first epochs, read from set_epoch().
    clip_norm: local gradient clipping to clip_norm / sqrt(size) per tensor (0: off).
    sample_fraction: share of elements sampled to estimate the top-k threshold (the selection
    itself is exact). One set of settings per job, the same on every rank (checked: the first use
    is collective, and a MismatchError names the setting and the ranks that differ).
    """

    wire = "dgc"

    def __init__(self, sparsity=0.999, momentum=None, warmup_epochs=4, clip_norm=0.0,
                 sample_fraction=0.0005, min_sparse_elements=4096):
        def number(name, value):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value):
                raise ValueError(f"ringd: Compression.dgc({name}={value!r}): expected a finite "
                                 "number")
            return float(value)

        def count(name, value, most):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
                raise ValueError(f"ringd: Compression.dgc({name}={value!r}): expected an integer "
                                 f"in [0, {most}]")
            return value

        self.sparsity = number("sparsity", sparsity)
        if not 0.0 <= self.sparsity < 1.0:
            raise ValueError(f"ringd: Compression.dgc(sparsity={sparsity}): outside [0, 1) (0.999 "
                             "sends 0.1% of each tensor)")
        self.momentum = None if momentum is None else number("momentum", momentum)
        if self.momentum is not None and not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"ringd: Compression.dgc(momentum={momentum}): outside [0, 1)")
        self.warmup_epochs = count("warmup_epochs", warmup_epochs, 64)
        self.clip_norm = number("clip_norm", clip_norm)
        if self.clip_norm < 0:
            raise ValueError(f"ringd: Compression.dgc(clip_norm={clip_norm}): must be >= 0")
        self.sample_fraction = number("sample_fraction", sample_fraction)
        if not 0.0 < self.sample_fraction <= 1.0:
            raise ValueError(f"ringd: Compression.dgc(sample_fraction={sample_fraction}): outside "
                             "(0, 1]")
        self.min_sparse_elements = count("min_sparse_elements", min_sparse_elements, 2**62)
        # Built once: every DGC submission checks them against the job's (dgc.configure).
        self._settings = {"sparsity": self.sparsity, "warmup": self.warmup(),
                          "momentum": 0.9 if self.momentum is None else self.momentum,
                          "clip_norm": self.clip_norm, "sample_fraction": self.sample_fraction,
                          "min_sparse_elements": self.min_sparse_elements}

    def with_momentum(self, momentum):
        """A copy with `momentum` in place of None."""
        return DGCCompressor(self.sparsity, momentum, self.warmup_epochs, self.clip_norm,
                             self.sample_fraction, self.min_sparse_elements)

    def warmup(self):
        """The sparsity of each warm-up epoch: each sends a quarter of the share the one before
        did (75%, 93.75%, ...), never sparser than `sparsity`."""
        schedule, density = [], 1.0
        for _ in range(self.warmup_epochs):
            density /= 4
            schedule.append(min(1.0 - density, self.sparsity))
        return schedule

    def settings(self):
        """The engine's settings (Job.set_dgc_options' arguments; not to be modified)."""
        return self._settings

    def __repr__(self):
        return (f"Compression.dgc(sparsity={self.sparsity}, momentum={self.momentum}, "
                f"warmup_epochs={self.warmup_epochs}, clip_norm={self.clip_norm}, "
                f"sample_fraction={self.sample_fraction}, "
                f"min_sparse_elements={self.min_sparse_elements})")


class Compression:
    """The compressors by name, as Horovod has them (plus bf16 and dgc)."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor

    @staticmethod
    def dgc(sparsity=0.999, momentum=None, warmup_epochs=4, clip_norm=0.0,
            sample_fraction=0.0005, min_sparse_elements=4096):
        """Deep gradient compression with these settings (DGCCompressor)."""
        return DGCCompressor(sparsity, momentum, warmup_epochs, clip_norm, sample_fraction,
                             min_sparse_elements)


# What Compression.dgc passed without calling it and the name "dgc" stand for: made once, not on
# every submission (a DGCCompressor is not modified after it is made).
_DEFAULT_DGC = DGCCompressor()


def dgc_compressor(compression):
    """The DGCCompressor that `compression` asks for, or None: a DGCCompressor itself, or the
    default settings for Compression.dgc passed without calling it (as one passes
    Compression.fp16) and for the name "dgc"."""
    if isinstance(compression, DGCCompressor):
        return compression
    if compression is Compression.dgc or (isinstance(compression, str) and compression == "dgc"):
        return _DEFAULT_DGC
    return None


def wire_and_python_compressor(compression):
    """(the engine's compression name or None, a Python-side compressor or None)."""
    if compression is None:
        return None, None
    if isinstance(compression, str):
        return compression, None
    if dgc_compressor(compression) is not None:
        return "dgc", None
    if hasattr(compression, "wire"):
        return compression.wire, None
    return None, compression
