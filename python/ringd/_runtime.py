"""The one job of this process, shared by the NumPy-level API (ringd) and ringd.torch.

Horovod-style code calls init() once and then module-level functions; they all reach the job
opened here. Names that the caller does not give come from per-kind counters, so ranks that make
the same calls in the same order generate the same names ("allreduce.noname.3"); one thread at a
time may make unnamed calls (the order of several threads' calls differs between ranks).

When this process stops its job, the other ranks are told why (their errors name this rank and
the reason): shutdown() called, the interpreter exiting (the script ended, sys.exit), or exiting on an uncaught
exception (recorded by a sys.excepthook that init() chains in front of the existing one).
A child forked after init() inherits the job object but not its threads: there the job is left
alone (the C++ side leaks it), and a collective raises at once (common/fork_guard.h).
"""

import atexit
import collections
import itertools
import os
import sys
import threading
import warnings
import weakref

from ringd._core import ElasticJob, InvalidArgumentError, Job, RingdError

# Reduction operators, as Horovod spells them (the values are ringd's op names).
Average = "avg"
Sum = "sum"
Min = "min"
Max = "max"
Product = "prod"
_OPS = {Average, Sum, Min, Max, Product}

_lock = threading.Lock()
_job = None
_elastic = None  # ringd._core.ElasticJob when RINGD_ELASTIC_RENDEZVOUS made init() elastic
_counters = collections.defaultdict(itertools.count)
_unnamed_thread = None  # weakref to the thread that makes the unnamed calls
_uncaught = None  # "ValueError: ..." once an uncaught exception is on its way to ending the process


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
        elastic = os.environ.get("RINGD_ELASTIC_RENDEZVOUS", "")
        if elastic and rank < 0 and size < 0 and not rendezvous:
            job = _open_elastic(elastic, timeout_s, interface)
        else:
            job = Job(rank=rank, size=size, rendezvous=rendezvous, transport=transport,
                      timeout_s=timeout_s, interface=interface)
        if comm is not None and sorted(comm) != list(range(job.size)):
            job.shutdown()
            raise NotImplementedError(
                f"ringd: init(comm={comm!r}): ringd runs collectives on all {job.size} ranks; "
                "pass comm=None")
        _job = job
        _counters.clear()
        _chain_excepthook()


def _open_elastic(address, timeout_s, interface):
    """The first generation of an elastic job (docs/elastic.md): RINGD_ELASTIC_RENDEZVOUS=host:port
    (the process on host serves it), RINGD_ELASTIC_MIN_RANKS (1), RINGD_ELASTIC_MAX_RANKS
    (required), the job identity from RINGD_JOB_ID or the secret."""
    global _elastic

    def count(name, text, default):
        if not text:
            if default is None:
                raise InvalidArgumentError(f"ringd: RINGD_ELASTIC_RENDEZVOUS={address} needs {name} "
                                           "(the most ranks the elastic job trains with)")
            return default
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise InvalidArgumentError(f"ringd: {name}={text!r} is not a positive rank count")
        return value

    min_ranks = count("RINGD_ELASTIC_MIN_RANKS", os.environ.get("RINGD_ELASTIC_MIN_RANKS", ""), 1)
    max_ranks = count("RINGD_ELASTIC_MAX_RANKS", os.environ.get("RINGD_ELASTIC_MAX_RANKS", ""),
                      None)
    _elastic = ElasticJob(address, min_ranks, max_ranks, timeout_s, interface=interface)
    return _elastic.form(-1)


def elastic_job():
    """The process's ringd._core.ElasticJob, or None when the job is not elastic."""
    return _elastic


def reform(reason, step):
    """Elastic jobs: shuts the current generation's job down, ends the generation for `reason` and
    forms the next one (`step`: how far this process's state is, -1 none); ringd.torch.elastic.run
    calls it."""
    global _job
    with _lock:
        job, _job = _job, None
    if job is not None:
        job.shutdown(f"the elastic job re-forms: {reason}", False)
    _elastic.end(reason)
    formed = _elastic.form(step)
    with _lock:
        _job = formed
        _counters.clear()


def finish_elastic(reason):
    """Elastic jobs: the training is done; a process that arrives later is told so (it would
    otherwise start a job of its own from nothing). Best effort: the process serving the store
    may have ended already."""
    if _elastic is not None:
        try:
            _elastic.finish(reason)
        except RingdError:
            pass


def shutdown(reason=None, failed=False):
    """Stops the engine (on every rank, in effect: their pending operations fail, naming this rank
    and `reason`; `failed`: this rank stops because of its own error) and closes the connection.
    Idempotent; init() may open a new job afterwards."""
    global _job
    with _lock:
        job, _job = _job, None
    if job is not None:
        job.shutdown(f"shutdown() was called on this rank (pid {os.getpid()})"
                     if reason is None else str(reason), bool(failed))


def _shutdown_at_exit():
    if _uncaught is not None:
        shutdown(f"its process is exiting on an uncaught {_uncaught}", failed=True)
    else:
        shutdown("its process is exiting without an uncaught exception (the script ended, or sys.exit; "
                 "no ringd.shutdown() before)")


atexit.register(_shutdown_at_exit)


def _chain_excepthook():
    """Records an uncaught exception for the exit's shutdown reason, then runs the hook that was
    installed before (normally Python's, which prints the traceback)."""
    previous = sys.excepthook
    if getattr(previous, "_ringd_records", False):
        return

    def hook(kind, value, traceback):
        global _uncaught
        text = f"{kind.__name__}: {value}".strip()
        _uncaught = text if len(text) <= 500 else text[:497] + "..."
        previous(kind, value, traceback)

    hook._ringd_records = True
    sys.excepthook = hook


def _after_fork_in_child():
    """The parent's job stays the parent's: a fresh lock (another thread may have held this one
    when the process forked); the shutdown at this child's exit then does nothing (the C++ side
    knows the job belongs to the parent)."""
    global _lock, _unnamed_thread
    _lock = threading.Lock()
    _unnamed_thread = None


os.register_at_fork(after_in_child=_after_fork_in_child)


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
    """`name`, or "<kind>.noname.<n>" counting the unnamed calls of that kind on this rank.

    Unnamed calls come from one thread at a time: from several threads at once, the order of the
    calls (and so which tensor gets which name) would differ from rank to rank and the ranks would
    reduce different tensors together. Another thread may take over once the first has ended."""
    global _unnamed_thread
    if name is not None:
        return str(name)
    current = threading.current_thread()
    with _lock:
        owner = _unnamed_thread() if _unnamed_thread is not None else None
        if owner is None or not owner.is_alive():
            _unnamed_thread = weakref.ref(current)
        elif owner is not current:
            raise InvalidArgumentError(
                f"ringd: an unnamed {kind} from thread {current.name!r} while thread "
                f"{owner.name!r} also makes unnamed calls: the automatic names "
                f"('{kind}.noname.N') follow each process's call order, which differs between "
                "threads on different ranks, so the ranks would combine different tensors. Pass "
                "name= to every collective called from more than one thread")
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
