"""torch.distributed backend "ringd": unmodified torch.distributed code, DDP included, on ringd.

    import ringd.torch                                   # registers the backend
    torch.distributed.init_process_group("ringd")        # under torchrun or mpirun, env://
    model = torch.nn.parallel.DistributedDataParallel(model)

The group runs torch.distributed's collectives on the job of this process (ringd.torch.init()'s;
init_process_group opens it with torch's rank and world size where ringd.torch has not, finding
the other ranks as ringd.torch.init() does: mpirun's, torchrun's or a pod's environment, with
ringd's store at MASTER_PORT + 1 beside torch's). Every collective goes through the fusion engine
under the name "torch.<group>.<kind>.<n>", counted per group in call order (torch.distributed
already requires every rank to make a group's calls in the same order), so DDP's buckets are
fused and negotiated like any other tensors, and a mismatch across ranks names the call.

Supported, on CPU tensors of ringd's dtypes: all_reduce (SUM, PRODUCT, MIN, MAX, AVG), broadcast,
all_gather (and all_gather_object, broadcast_object_list through them), barrier, reduce (an
allreduce: every rank gets the result, torch only promises it to dst), reduce_scatter (an
allreduce of the whole list, then this rank's part: allreduce's bytes, twice reduce-scatter's).
Not supported, NotImplementedError naming the call: gather, scatter, all_to_all, send/recv, groups
of some of the ranks (new_group() of them succeeds, as torch needs every rank to get that far;
their first collective raises: ringd's collectives run on every rank; a new_group() of all ranks
works), bitwise ops, CUDA tensors (use ringd.torch's own API, which stages them through host
memory).

Completion: an all_reduce that DDP's reducer starts inside the backward pass returns at once, its
Work over a Future that the group's completion thread sets once ringd's handle finishes (the
thread waits without the GIL): buckets overlap the rest of the backward pass, and a failure (a
dead peer, a mismatch, a timeout) is the Future's exception, which DDP raises. Every other call
waits for ringd before it returns and raises a failure itself, async_op=True included (its Work
is then finished): torch 2.5 lets a Python backend's Work fail silently (_completed says why).
"""

import itertools
import os
import queue
import sys
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

from ringd import _runtime
from ringd._runtime import Average, Max, Min, Product, Sum
from ringd.torch import _submit

BACKEND = "ringd"

_OPS = {
    dist.ReduceOp.SUM: Sum,
    dist.ReduceOp.PRODUCT: Product,
    dist.ReduceOp.MIN: Min,
    dist.ReduceOp.MAX: Max,
    dist.ReduceOp.AVG: Average,
}


def _ringd_op(op):
    for torch_op, ringd_op in _OPS.items():
        if op == torch_op:
            return ringd_op
    raise NotImplementedError(f"ringd: reduce op {op} is not supported (SUM, PRODUCT, MIN, MAX, "
                              "AVG)")


def _called_by_autograd():
    """True when the nearest Python frame outside this module is torch.autograd's: the call
    comes from C++ inside a backward pass (DDP's reducer launching a bucket), whose caller chains
    on Work.get_future() and raises the Future's error."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    autograd = f"{os.sep}torch{os.sep}autograd{os.sep}"
    return frame is not None and autograd in frame.f_code.co_filename


def _completed(handles, finish):
    """Waits for the handles here (the GIL released) and returns a finished Work; a failure
    raises from the call itself. Every call but the backward pass's completes this way: torch
    2.5 passes neither wait() nor get_future() of a Python Work subclass on to its C++ callers
    (DDP's parameter check and broadcasts would never see it finish), and its own Work over a
    Future returns True from wait() even when the Future failed, so an asynchronous failure would
    pass unseen by a caller that only waits."""
    for handle in handles:
        handle.wait()
    future = torch.futures.Future()
    future.set_result(finish())
    return _create_work_from_future(future)


class _Completions:
    """One daemon thread that waits for ringd handles in submission order and sets each call's
    Future: its result, or the exception the wait raised."""

    def __init__(self, name):
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, handles, finish):
        future = torch.futures.Future()
        # The submitting thread (DDP's backward) then waits on the Future, where ringd cannot see
        # it: the waits here are made for it, so a deadlock across ranks is still detected.
        self._queue.put((handles, finish, future, threading.get_ident()))
        # What C++ waits on is a callback's Future: torch's set_exception() only stores the
        # exception as the value (C++ would read it as the result: DDP's reducer crashed on one),
        # while a callback that raises makes its Future fail in C++ with the message.
        return _create_work_from_future(future.then(_value))

    def close(self):
        self._queue.put(None)

    def _run(self):
        while (item := self._queue.get()) is not None:
            _complete(*item)
            # Nothing of a finished call stays referenced while the thread waits for the next
            # (at exit a daemon thread's locals are never freed).
            del item


def _value(future):
    return future.value()  # raises the collective's error


def _complete(handles, finish, future, submitter):
    try:
        for handle in handles:
            handle.wait(for_thread=submitter)
        result = finish()
    except Exception as error:  # noqa: BLE001 - handed to whoever waits
        future.set_exception(error)
    else:
        future.set_result(result)


class ProcessGroupRingd(dist.ProcessGroup):
    """A torch.distributed process group over ringd's job; made by init_process_group."""

    def __init__(self, rank, size, group_id, refusal=None):
        super().__init__(rank, size)
        self._refusal = refusal  # why every collective of this group fails (None: they run)
        self._prefix = f"torch.{group_id}"
        self._counters = {}
        self._completions = _Completions(f"ringd-pg-{group_id}")
        self.overlapped_calls = 0  # all_reduces that returned before ringd finished them

    def getBackendName(self):  # noqa: N802 - torch's name
        return BACKEND

    def __repr__(self):
        return f"ProcessGroupRingd(rank={self.rank()}, size={self.size()}, {self._prefix})"

    def _name(self, kind):
        """The next call's name; every collective asks first, so a refused group fails here."""
        if self._refusal:
            raise NotImplementedError(self._refusal)
        counter = self._counters.setdefault(kind, itertools.count())
        return f"{self._prefix}.{kind}.{next(counter)}"

    @staticmethod
    def _check_cpu(tensors, names):
        """The backend runs CPU tensors (ringd.torch's own collectives stage CUDA tensors)."""
        for tensor, name in zip(tensors, names):
            if isinstance(tensor, torch.Tensor) and tensor.device.type != "cpu":
                raise NotImplementedError(
                    f"ringd: the torch.distributed backend runs CPU tensors; {name} is on "
                    f"{tensor.device} (ringd.torch's own collectives stage CUDA tensors)")

    def _in_place(self, tensors, kind, start):
        """Each tensor named and checked, then staged in place and submitted by start(tensors,
        names) -> _submit.Started; the handles, and what puts the results into the tensors and
        returns them."""
        tensors = list(tensors)
        names = [self._name(kind) for _ in tensors]
        self._check_cpu(tensors, names)
        started = start(tensors, names)

        def finish():
            started.finish()
            return tensors

        return started.handles, finish

    # --- the collectives torch.distributed calls (PyProcessGroup's overridable methods) --------

    def allreduce(self, tensors, opts=None):
        op = _ringd_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        return self._allreduce(tensors, op, "allreduce")

    def _allreduce(self, tensors, op, kind):
        handles, finish = self._in_place(
            tensors, kind,
            lambda staged, names: _submit.start_allreduce(staged, names, op, "none", in_place=True))
        if _called_by_autograd():  # DDP's reducer: it waits on the Future, overlapping backward
            self.overlapped_calls += 1
            return self._completions.submit(handles, finish)
        return _completed(handles, finish)

    def reduce(self, tensors, opts=None):
        op = _ringd_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        return self._allreduce(tensors, op, "reduce")

    def broadcast(self, tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        return _completed(*self._in_place(
            tensors, "broadcast",
            lambda staged, names: _submit.start_broadcast(staged, names, root, in_place=True)))

    def allgather(self, output_tensors, input_tensors, opts=None):
        size = self.size()
        calls = []
        for outputs, tensor in zip(output_tensors, input_tensors):
            name = self._name("allgather")
            if len(outputs) != size:
                raise ValueError(f"ringd: {name}: {len(outputs)} output tensors for {size} ranks")
            self._check_cpu([tensor], [name])
            calls.append((outputs, tensor, _submit.start_allgather(tensor.reshape(-1), name)))

        def finish():
            for outputs, tensor, started in calls:
                gathered = started.finish()
                count = tensor.numel()
                if gathered.numel() != count * size:
                    raise ValueError(f"ringd: all_gather needs the same number of elements on "
                                     f"every rank; got {gathered.numel()} in all, {count} here")
                with torch.no_grad():
                    for rank, output in enumerate(outputs):
                        output.copy_(gathered[rank * count:(rank + 1) * count].view_as(output))
            return output_tensors

        return _completed([handle for _, _, started in calls for handle in started.handles],
                          finish)

    def barrier(self, opts=None):
        token = torch.zeros(1, dtype=torch.int32)
        started = _submit.start_allreduce([token], [self._name("barrier")], Sum, "none",
                                          in_place=True)
        return _completed(started.handles, lambda: None)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        op = _ringd_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        rank = self.rank()
        pieces = []
        for output, inputs in zip(output_tensors, input_tensors):
            whole = torch.cat([piece.reshape(-1) for piece in inputs])
            start = sum(piece.numel() for piece in inputs[:rank])
            pieces.append((output, whole, start))
        wholes = [whole for _, whole, _ in pieces]
        names = [self._name("reduce_scatter") for _ in pieces]
        self._check_cpu(wholes, names)
        started = _submit.start_allreduce(wholes, names, op, "none", in_place=True)

        def finish():
            started.finish()
            with torch.no_grad():
                for output, whole, start in pieces:
                    output.copy_(whole[start:start + output.numel()].view_as(output))
            return output_tensors

        return _completed(started.handles, finish)

    def _unsupported(self, call):
        raise NotImplementedError(f"ringd: torch.distributed.{call} is not supported by the "
                                  "ringd backend (all_reduce, broadcast, all_gather, barrier, "
                                  "reduce and reduce_scatter are)")

    def gather(self, *args):
        self._unsupported("gather")

    def scatter(self, *args):
        self._unsupported("scatter")

    def alltoall_base(self, *args):
        self._unsupported("all_to_all_single")

    def alltoall(self, *args):
        self._unsupported("all_to_all")

    def send(self, *args):
        self._unsupported("send")

    def recv(self, *args):
        self._unsupported("recv")

    def recv_anysource(self, *args):
        self._unsupported("recv")

    def shutdown(self):
        self._completions.close()


def _create(backend_options, group_options):
    """The backend's creator (extended API): one group per init_process_group / new_group."""
    rank, size = backend_options.group_rank, backend_options.group_size
    ranks = list(backend_options.global_ranks_in_group)
    if not _runtime.is_initialized():
        _runtime.init(rank=rank, size=size)
    job = _runtime.job()
    if ranks and ranks != list(range(job.size)):
        # Made all the same (new_group's members and the other ranks meet in a barrier after
        # this), failing at its first collective.
        return ProcessGroupRingd(rank, size, backend_options.group_id, refusal=(
            f"ringd: a torch.distributed group of ranks {ranks} out of {job.size}: ringd's "
            "collectives run on every rank; use the default group or new_group() of all ranks"))
    if (rank, size) != (job.rank, job.size):
        raise ValueError(f"ringd: torch.distributed says rank {rank} of {size}, but this "
                         f"process's ringd job is rank {job.rank} of {job.size}")
    return ProcessGroupRingd(rank, size, backend_options.group_id)


def register():
    """Makes init_process_group("ringd") work; import ringd.torch calls it. Idempotent."""
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu"])


__all__ = ["BACKEND", "ProcessGroupRingd", "register"]
