"""init() for TensorFlow users: ringd's usual discovery (mpirun, torchrun-style variables, a
StatefulSet pod, explicit arguments; ringd._runtime.init), plus TF_CONFIG, which TFJob and the
Kubeflow training operator set in every pod, so a TFJob's pods find each other unchanged.

TF_CONFIG = {"cluster": {"chief": ["a:2222"], "worker": ["b:2222", "c:2222"]},
             "task": {"type": "worker", "index": 1}}
gives rank 2 of 3 (the chief first, then the workers in order); rank 0 serves ringd's rendezvous
at its TF_CONFIG address (the port TFJob opened for TensorFlow's own server, unused under ringd).
Parameter-server and evaluator tasks have no place in an allreduce job: their init() raises,
naming the task (docs/tensorflow.md: from TFJob with parameter servers to ringd).
"""

import json
import os

from ringd import _runtime
from ringd._core import InvalidArgumentError

_OTHER_SOURCES = ("OMPI_COMM_WORLD_RANK", "RANK", "POD_NAME")


def from_tf_config(text):
    """(rank, size, rendezvous) from a TF_CONFIG text; InvalidArgumentError naming what is wrong."""
    try:
        config = json.loads(text)
        cluster = config["cluster"]
        task = config["task"]
        kind = task["type"]
        index = int(task["index"])
    except (ValueError, KeyError, TypeError) as error:
        raise InvalidArgumentError(f"ringd: TF_CONFIG is not TensorFlow's cluster spec "
                                   f"({type(error).__name__}: {error}): {text[:200]!r}") from None
    if kind not in ("chief", "master", "worker"):
        raise InvalidArgumentError(
            f"ringd: TF_CONFIG makes this process task {kind!r} {index}; ringd averages "
            "gradients without parameter servers or evaluators, so only chief and worker tasks "
            "take part (remove the PS replicas from the TFJob; docs/tensorflow.md)")
    members = [*cluster.get("chief", []), *cluster.get("master", []), *cluster.get("worker", [])]
    leaders = len(cluster.get("chief", [])) + len(cluster.get("master", []))
    rank = index if kind in ("chief", "master") else leaders + index
    if not members or not 0 <= rank < len(members):
        raise InvalidArgumentError(f"ringd: TF_CONFIG task {kind!r} {index} is not in its "
                                   f"cluster of {len(members)} chief and worker tasks")
    return rank, len(members), members[0]


def init(comm=None, process_sets=None, *, rank=-1, size=-1, rendezvous="", transport="",
         timeout_s=0.0, interface=""):
    """Opens this process's job (collective: every rank calls it); a second call does nothing.
    TF_CONFIG is read when nothing else says where the ranks are (module docstring)."""
    text = os.environ.get("TF_CONFIG")
    explicit = rank >= 0 or size >= 0
    if text and not explicit and not any(os.environ.get(name) for name in _OTHER_SOURCES):
        rank, size, found = from_tf_config(text)
        rendezvous = rendezvous or found
    _runtime.init(comm, process_sets, rank=rank, size=size, rendezvous=rendezvous,
                  transport=transport, timeout_s=timeout_s, interface=interface)
