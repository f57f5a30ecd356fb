"""The job's deep gradient compression settings (Compression.dgc): handed to the engine once,
after checking that every rank gives the same ones.

configure(compressor) is collective the first time a job sees DGC (DistributedOptimizer's
constructor, or the first allreduce with Compression.dgc): the ranks exchange their settings and
every rank raises MismatchError, naming the setting and the ranks, when they differ. Later calls
with the same settings cost nothing; other settings raise InvalidArgumentError (one set per job:
the engine's velocities and residuals were built under the first).
"""

import threading

from ringd import _runtime
from ringd._core import InvalidArgumentError, MismatchError
from ringd.collectives import allgather_object

_lock = threading.Lock()
_configured = {"job": None, "settings": None}


def _describe(settings):
    return ", ".join(f"{key}={value!r}" for key, value in settings.items())


def configure(compressor):
    """Gives the engine `compressor`'s settings (a DGCCompressor); see the module's text."""
    settings = compressor.settings()
    job = _runtime.job()
    with _lock:
        if _configured["job"] is job:
            if _configured["settings"] == settings:
                return
            raise InvalidArgumentError(
                f"ringd: rank {job.rank}: Compression.dgc settings differ from the ones this job "
                f"already uses ({_describe(_configured['settings'])}; now {_describe(settings)}); "
                "a job has one set of DGC settings")
    everyone = allgather_object(settings, name=_runtime.name_or_default(None, "dgc.settings"))
    for key in settings:
        values = {}
        for rank, theirs in enumerate(everyone):
            values.setdefault(repr(theirs.get(key)), []).append(rank)
        if len(values) > 1:
            raise MismatchError(
                f"ringd: rank {job.rank}: the ranks give Compression.dgc different {key}: " +
                "; ".join(f"ranks {ranks} have {value}" for value, ranks in values.items()))
    job.set_dgc_options(**settings)
    with _lock:
        _configured["job"] = job
        _configured["settings"] = settings


def set_epoch(epoch):
    """The epoch (from 0) DGC's sparsity warm-up reads. Every rank calls it with the same epoch
    before that epoch's first gradient (ranks that disagree fail with MismatchError at the next
    DGC exchange). Without DGC it does nothing."""
    if isinstance(epoch, bool) or not isinstance(epoch, int):
        raise InvalidArgumentError(f"ringd: set_epoch({epoch!r}): expected an integer epoch")
    _runtime.job().set_epoch(epoch)
