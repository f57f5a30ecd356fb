"""The one job of this process, shared by the NumPy-level API (ringd) and ringd.torch.

Horovod-style code calls init() once and then module-level functions; they all reach the job
opened here. Names that the caller does not give come from per-kind counters, so ranks that make
the same calls in the same order generate the same names ("allreduce.noname.3").
"""

import atexit
import collections
import itertools
import threading
import warnings

from ringd._core import InvalidArgumentError, Job

# Reduction operators, as Horovod spells them (the values are ringd's op names).
Average = "avg"
Sum = "sum"
Min = "min"
Max = "max"
Product = "prod"
_OPS = {Average, Sum, Min, Max, Product}

_lock = threading.Lock()
_job = None
_counters = collections.defaultdict(itertools.count)


def init(comm=None, process_sets=None, *, rank=-1, size=-1, rendezvous="", transport="",
         timeout_s=0.0, interface=""):
    """Opens this process's job (collective: every rank calls it); a second call does nothing.

    Where the ranks are comes from the environment unless given (mpirun's OMPI_COMM_WORLD_*,
    torchrun's RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT, a StatefulSet
    pod, else a world of one; include/ringd/job.h). timeout_s=0 takes RINGD_TIMEOUT. `comm` and
    `process_sets` are accepted for Horovod's signature; ringd has one global set of ranks, so
    anything but None (or every rank) is an error.
    """
    global _job
    if process_sets not in (None, "dynamic") and process_sets != []:
        raise NotImplementedError("ringd: process sets are not supported; every collective runs "
                                  "on all ranks")
    with _lock:
        if _job is not None:
            return
        job = Job(rank=rank, size=size, rendezvous=rendezvous, transport=transport,
                  timeout_s=timeout_s, interface=interface)
        if comm is not None and sorted(comm) != list(range(job.size)):
            job.shutdown()
            raise NotImplementedError(
                f"ringd: init(comm={comm!r}): ringd runs collectives on all {job.size} ranks; "
                "pass comm=None")
        _job = job
        _counters.clear()


def shutdown():
    """Stops the engine (on every rank, in effect: their pending operations fail) and closes the
    connection. Idempotent; init() may open a new job afterwards."""
    global _job
    with _lock:
        job, _job = _job, None
    if job is not None:
        job.shutdown()


atexit.register(shutdown)


def is_initialized():
    return _job is not None


def job():
    """The open job; ValueError (InvalidArgumentError) before init()."""
    current = _job
    if current is None:
        raise InvalidArgumentError("ringd: not initialized; call init() first (every rank)")
    return current


def rank():
    return job().rank


def size():
    return job().size


def local_rank():
    return job().local_rank


def local_size():
    return job().local_size


def cross_rank():
    return job().cross_rank


def cross_size():
    return job().cross_size


def name_or_default(name, kind):
    """`name`, or "<kind>.noname.<n>" counting the unnamed calls of that kind on this rank."""
    if name is not None:
        return str(name)
    return f"{kind}.noname.{next(_counters[kind])}"


def check_op(op):
    if op not in _OPS:
        raise InvalidArgumentError(
            f"ringd: op {op!r} is not one of Average, Sum, Min, Max, Product "
            f"({', '.join(sorted(_OPS))})")
    return op


def op_from_average(op, average, default=Average):
    """Horovod's deprecated `average=` flag, if given, as an op."""
    if average is not None:
        if op is not None:
            raise ValueError("ringd: pass either op or average, not both")
        warnings.warn("ringd: `average` is deprecated (as in Horovod); pass op=Average or op=Sum",
                      DeprecationWarning, stacklevel=3)
        return Average if average else Sum
    return check_op(default if op is None else op)
