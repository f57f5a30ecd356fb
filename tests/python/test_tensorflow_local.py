"""ringd.tensorflow in one process: TF_CONFIG (TFJob's cluster spec) read into ranks, its errors,
and the ops' library built once and cached."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("tensorflow")

from ringd.tensorflow import topology  # noqa: E402

CLUSTER = {"chief": ["chief-0:2222"], "worker": ["worker-0:2222", "worker-1:2222"],
           "ps": ["ps-0:2222"]}


def config(kind, index, cluster=CLUSTER):
    return json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})


def test_the_chief_is_rank_0_and_the_workers_follow():
    assert topology.from_tf_config(config("chief", 0)) == (0, 3, "chief-0:2222")
    assert topology.from_tf_config(config("worker", 0)) == (1, 3, "chief-0:2222")
    assert topology.from_tf_config(config("worker", 1)) == (2, 3, "chief-0:2222")


def test_without_a_chief_worker_0_serves_the_rendezvous():
    cluster = {"worker": ["a:1", "b:2"]}
    assert topology.from_tf_config(config("worker", 1, cluster)) == (1, 2, "a:1")


@pytest.mark.parametrize("kind", ["ps", "evaluator"])
def test_parameter_servers_and_evaluators_are_refused_by_name(kind):
    with pytest.raises(ValueError, match=f"task '{kind}' 0.*parameter servers"):
        topology.from_tf_config(config(kind, 0))


@pytest.mark.parametrize("text", ["not json", json.dumps({"cluster": {}}),
                                  config("worker", 5)])
def test_malformed_tf_config_is_an_error_quoting_it(text):
    with pytest.raises(ValueError, match="TF_CONFIG"):
        topology.from_tf_config(text)


def test_init_reads_tf_config_when_nothing_else_speaks(tmp_path):
    """A chief and a worker that know only TF_CONFIG find each other (the chief serves ringd's
    rendezvous at its TF_CONFIG address) and reduce; the ops' library is built once, cached."""
    from worker_launcher import free_port

    env = {key: value for key, value in os.environ.items()
           if key not in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "POD_NAME")}
    env.update(RINGD_CACHE_DIR=str(tmp_path / "cache"), RINGD_IFACE="lo",
               RINGD_JOB_SECRET="tf-config-test", RINGD_TIMEOUT="20", TF_CPP_MIN_LOG_LEVEL="2")
    cluster = {"chief": [f"127.0.0.1:{free_port()}"], "worker": ["127.0.0.1:1"]}
    code = ("import ringd.tensorflow as hvd; hvd.init(); "
            "print(hvd.rank(), hvd.size(), hvd.allreduce([1.0 + hvd.rank()], op=hvd.Sum)"
            ".numpy().tolist())")
    procs = [subprocess.Popen([sys.executable, "-c", code], text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE,
                              env=dict(env, TF_CONFIG=config(kind, 0, cluster)))
             for kind in ("chief", "worker")]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    for rank, (proc, (out, err)) in enumerate(zip(procs, outputs)):
        assert proc.returncode == 0, err[-3000:]
        assert out.strip().split("\n")[-1] == f"{rank} 2 [3.0]", out
    built = list(pathlib.Path(tmp_path / "cache" / "tf-ops").glob("ringd_tf_ops-tf*.so"))
    assert len(built) == 1, built


def test_a_world_of_one_is_the_identity(tmp_path):
    """One process: every collective returns its input (no op runs), eagerly and in tf.function;
    a broadcast from a rank that does not exist is still an error."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "POD_NAME", "TF_CONFIG")}
    env.update(RINGD_CACHE_DIR=str(tmp_path / "cache"), TF_CPP_MIN_LOG_LEVEL="2")
    code = """
import numpy as np, tensorflow as tf
import ringd.tensorflow as hvd
hvd.init()
assert hvd.size() == 1
x = tf.constant([[1.5, -2.0], [3.0, 4.0]])
for run in (lambda f, *a: f(*a), lambda f, *a: tf.function(f)(*a)):
    np.testing.assert_array_equal(run(lambda t: hvd.allreduce(t), x).numpy(), x.numpy())
    np.testing.assert_array_equal(
        run(lambda t: hvd.allreduce(t, op=hvd.Sum, postscale_factor=2.0), x).numpy(), 2 * x.numpy())
    np.testing.assert_array_equal(run(lambda t: hvd.allreduce(t), tf.constant([7, 9])).numpy(),
                                  [7, 9])
    assert run(lambda t: hvd.allgather(t), tf.constant(5)).numpy().tolist() == [5]
    np.testing.assert_array_equal(run(lambda t: hvd.broadcast(t, 0), x).numpy(), x.numpy())
v = tf.Variable([1.0, 2.0])
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(v * v)
assert hvd.DistributedGradientTape(tape).gradient(loss, [v])[0].numpy().tolist() == [2.0, 4.0]
try:
    hvd.broadcast(x, root_rank=1)
except hvd.InvalidArgumentError as error:
    assert "root 1" in str(error), error
else:
    raise AssertionError("broadcast from rank 1 of 1 did not fail")
print("identity ok")
"""
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "identity ok" in result.stdout
