"""The one place ringd.tensorflow builds ringd's ops (RingdSubmit, RingdWait; ops.cc) into a
computation, eager or inside tf.function.

  handles = submit(kind, tensors, names, ...)   every tensor to the engine at once (returns at once)
  results = wait(kind, handles)                 blocks until all are done

A world of one runs no op at all: every collective of one rank is the identity (submit() hands
the tensors back), so a single process pays nothing for ringd.

A step's submissions all come before its waits (a wait blocks one of TensorFlow's threads, which
must never hold back a submission another rank waits on): wait() takes control dependencies on
every submission made since the last wait in the same graph. Errors: in eager mode ringd's own
exception classes (PeerLostError, MismatchError, ...); inside tf.function the step fails with
TensorFlow's op error, whose message starts "[ringd:<code>]".
"""

import contextlib
import re
import threading

import tensorflow as tf

from ringd import _core, _runtime

ALLREDUCE, BROADCAST, ALLGATHER = 0, 1, 2

_lock = threading.Lock()
_module = None
_ERROR = re.compile(r"\[ringd:(\w+)\] ")


def ops():
    """The loaded, connected op library (compiled on first use; _build.py)."""
    global _module
    with _lock:
        if _module is None:
            from ringd.tensorflow import _build

            _module = _build.load()
        return _module


def ringd_error(error):
    """The ringd exception a TensorFlow op error carries, or None."""
    found = _ERROR.search(error.message or "")
    if found is None:
        return None
    cls = _core._error_classes.get(found.group(1), _core.RingdError)
    return cls(error.message[found.end():])


@contextlib.contextmanager
def translated_errors():
    """Eager: ringd's op errors become ringd's exceptions."""
    try:
        yield
    except tf.errors.OpError as error:
        translated = ringd_error(error)
        if translated is None:
            raise
        raise translated from None


class Submitted:
    """Tensors in flight: the buffers the engine writes and their handles."""

    __slots__ = ("kind", "buffers", "handles")

    def __init__(self, kind, buffers, handles):
        self.kind = kind
        self.buffers = buffers
        self.handles = handles


def submit(kind, tensors, names, group="", op="sum", root=0, compression=""):
    """Submits `tensors` (a list) under `names`; as one group when `group` names one."""
    tensors = [tf.convert_to_tensor(tensor) for tensor in tensors]
    if _runtime.size() == 1:
        if kind == BROADCAST and root != 0:
            raise _core.InvalidArgumentError(
                f"ringd: broadcast root {root} is not a rank of this job of one")
        return Submitted(kind, tensors, None)
    with translated_errors():
        buffers_and_handles = ops().ringd_submit(
            x=tensors, names=tf.constant([*names, group], dtype=tf.string), kind=kind, op=op,
            root=root, compression=compression or "")
    buffers, handles = buffers_and_handles
    submitted = Submitted(kind, list(buffers), handles)
    if not tf.executing_eagerly():
        _graph_submissions().append(handles)
    return submitted


def wait(submitted_list):
    """Waits for Submitted batches (of one kind each); returns their results, batch by batch."""
    results = []
    dependencies = []
    if not tf.executing_eagerly():
        pending = _graph_submissions()
        dependencies = list(pending)
        pending.clear()
    with tf.control_dependencies(dependencies), translated_errors():
        for submitted in submitted_list:
            if submitted.handles is None:  # a world of one
                results.append(list(submitted.buffers))
                continue
            outputs = ops().ringd_wait(y=submitted.buffers, handles=submitted.handles,
                                       kind=submitted.kind)
            outputs = list(outputs)
            for output, buffer in zip(outputs, submitted.buffers):
                shape = buffer.shape
                if submitted.kind == ALLGATHER:
                    shape = tf.TensorShape([None]).concatenate(shape[1:])
                output.set_shape(shape)
            results.append(outputs)
    return results


def run(kind, tensors, names, **options):
    """submit() then wait(): the results."""
    return wait([submit(kind, tensors, names, **options)])[0]


def _graph_submissions():
    """The handles submitted in the current graph since its last wait."""
    graph = tf.compat.v1.get_default_graph()
    pending = getattr(graph, "_ringd_pending_submissions", None)
    if pending is None:
        pending = []
        graph._ringd_pending_submissions = pending
    return pending
