"""One switch for the TensorFlow examples: the same script runs on ringd, on TensorFlow's own
strategies, or on Horovod, all started by the same launcher line (mpirun, or torchrun-style
RANK/WORLD_SIZE variables):

    --framework ringd     import ringd.keras as hvd / ringd.tensorflow (the default)
    --framework mwms      tf.distribute.MultiWorkerMirroredStrategy (its ring collectives)
    --framework horovod   import horovod.tensorflow.keras as hvd: the same calls, Horovod's engine
    --framework ps        tf.distribute.ParameterServerStrategy: the last --ps-tasks ranks run a
                          parameter server each (a TFJob's PS pods), the others a worker, rank 0
                          also the coordinator (the chief); the seeds' architecture.
                          --ps-placement colocated: a worker on every rank, the servers beside
                          the first ranks' workers instead
    --framework none      plain TensorFlow, one process (the baseline a single rank is held to)

MultiWorkerMirroredStrategy needs TF_CONFIG: a given one is used as it is; otherwise it is built
from the ranks and --hosts (one host per rank, default 127.0.0.1 for all) with TensorFlow's ports
--tf-port + rank. Keras 3's model.fit does not run under MultiWorkerMirroredStrategy (it fails on
PerReplica inputs: keras-team/keras#20585, tensorflow/tensorflow#72388), and Horovod's Keras
binding is for Keras 2, so those run on tf_keras (Keras 2, `keras` below; TensorFlow 2.15's own
tf.keras where Horovod runs: 2.15.1 is the newest TensorFlow its binding builds against,
bench/horovod_env.sh --tensorflow); ringd runs on Keras 3.
"""
import contextlib
import json
import os
import socket
import subprocess
import sys
import time

FRAMEWORKS = ("ringd", "mwms", "ps", "horovod", "none")


def launcher_rank_and_size():
    env = os.environ
    rank = int(env.get("OMPI_COMM_WORLD_RANK", env.get("RANK", "0")))
    size = int(env.get("OMPI_COMM_WORLD_SIZE", env.get("WORLD_SIZE", "1")))
    return rank, size


def tf_config(rank, size, hosts, base_port, task="worker"):
    """TF_CONFIG for `size` workers (this one `rank`) at hosts[i]:base_port + i."""
    hosts = hosts or ["127.0.0.1"] * size
    if len(hosts) == 1:
        hosts = hosts * size
    if len(hosts) != size:
        raise SystemExit(f"--hosts names {len(hosts)} hosts for {size} ranks")
    workers = [f"{host}:{base_port + i}" for i, host in enumerate(hosts)]
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": task, "index": rank}})


class Distributed:
    """What an example needs from its framework: rank, size, the strategy's scope, the optimizer
    wrapper, the Keras callbacks, and a gradient tape for custom loops."""

    def __init__(self, framework, hosts=None, tf_port=23456, ps_tasks=1,
                 ps_placement="dedicated"):
        import tensorflow as tf

        if framework not in FRAMEWORKS:
            raise ValueError(f"--framework {framework}: not one of {', '.join(FRAMEWORKS)}")
        self.framework = framework
        self.tf = tf
        self.hvd = None
        self.strategy = None
        if framework in ("mwms", "ps", "horovod"):
            try:
                import tf_keras as keras
                os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
            except ImportError:  # TensorFlow <= 2.15 (Horovod's): tf.keras is Keras 2
                keras = tf.keras
        else:
            import keras
        self.keras = keras  # the Keras this framework trains with
        self.coordinator = None
        if framework == "none":
            self.rank, self.size = 0, 1
        elif framework == "ps":
            self._start_ps_cluster(hosts, tf_port, ps_tasks, ps_placement == "colocated")
        elif framework == "mwms":
            rank, size = launcher_rank_and_size()
            if "TF_CONFIG" not in os.environ:
                os.environ["TF_CONFIG"] = tf_config(rank, size, hosts, tf_port)
            options = tf.distribute.experimental.CommunicationOptions(
                implementation=tf.distribute.experimental.CommunicationImplementation.RING)
            self.strategy = tf.distribute.MultiWorkerMirroredStrategy(
                communication_options=options)
            resolver = self.strategy.cluster_resolver
            self.rank, self.size = resolver.task_id, self.strategy.num_replicas_in_sync
        else:
            if framework == "ringd":
                import ringd.keras as hvd
                import ringd.tensorflow as tf_hvd
            else:
                try:
                    import horovod.tensorflow as tf_hvd
                    import horovod.tensorflow.keras as hvd
                except ImportError as error:
                    raise SystemExit(f"--framework horovod: {error} (bench/horovod_env.sh "
                                     "builds Horovod; docs/tensorflow.md says whether it builds "
                                     "against this TensorFlow)") from None
            hvd.init()
            self.hvd = hvd
            self.tf_hvd = tf_hvd  # for custom loops: DistributedGradientTape
            self.rank, self.size = hvd.rank(), hvd.size()

    def _start_ps_cluster(self, hosts, base_port, ps_tasks, colocated):
        """ParameterServerStrategy from one launcher line: the last ps_tasks ranks start a
        parameter server, the others a worker server (colocated: every rank a worker, the first
        ps_tasks ranks a parameter server beside it), as child processes; rank 0 becomes the
        chief, which drives the training. The other ranks return only when the chief is done:
        they exit here."""
        rank, size = launcher_rank_and_size()
        hosts = hosts or ["127.0.0.1"] * size
        if len(hosts) == 1:
            hosts = hosts * size
        if len(hosts) != size:
            raise SystemExit(f"--hosts names {len(hosts)} hosts for {size} ranks")
        workers = size if colocated else size - ps_tasks
        if not 1 <= ps_tasks <= size or workers < 1:
            raise SystemExit(f"--ps-tasks {ps_tasks}: at least 1, and a worker must be left of "
                             f"the {size} ranks")
        ps_hosts = hosts[:ps_tasks] if colocated else hosts[workers:]
        cluster = {"chief": [f"{hosts[0]}:{base_port}"],
                   "worker": [f"{hosts[i]}:{base_port + 1 + i}" for i in range(workers)],
                   "ps": [f"{host}:{base_port + 101 + i}" for i, host in enumerate(ps_hosts)]}
        children = []
        if rank < workers:
            children.append(self._start_server(cluster, "worker", rank))
        ps_index = rank if colocated else rank - workers
        if 0 <= ps_index < ps_tasks:
            children.append(self._start_server(cluster, "ps", ps_index))
        done_address = (hosts[0], base_port + 201)
        if rank != 0:
            # Until the chief closes this connection: then the servers go, and this rank ends.
            deadline = time.monotonic() + 120
            while True:
                try:
                    connection = socket.create_connection(done_address, timeout=5)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            connection.settimeout(None)
            while connection.recv(1):
                pass
            for child in children:
                child.kill()
            sys.exit(0)
        listener = socket.create_server(("", done_address[1]))
        self._others = [listener.accept()[0] for _ in range(size - 1)]  # every server is up
        self._children = children
        os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster,
                                              "task": {"type": "chief", "index": 0}})
        tf = self.tf
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        self.strategy = tf.distribute.ParameterServerStrategy(resolver)
        self.coordinator = tf.distribute.coordinator.ClusterCoordinator(self.strategy)
        self.rank, self.size = 0, workers  # the figures are per worker

    @staticmethod
    def _start_server(cluster, kind, index):
        """A TensorFlow server for task `kind` `index`, in a child process that ends with this
        one (its stdin closes); returns once it listens."""
        code = (
            "import os, sys, threading\n"
            "import tensorflow as tf\n"
            "threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True)"
            ".start()\n"
            "r = tf.distribute.cluster_resolver.TFConfigClusterResolver()\n"
            "server = tf.distribute.Server(r.cluster_spec(), job_name=r.task_type, "
            "task_index=r.task_id, protocol='grpc', start=True)\n"
            "print('ready', flush=True)\n"
            "server.join()\n")
        env = dict(os.environ, TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": kind, "index": index}}))
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        child = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        if child.stdout.readline().strip() != "ready":
            raise SystemExit(f"the {kind} {index} server did not start (exit {child.wait()})")
        return child

    def scope(self):
        """Where the model and optimizer are created."""
        return self.strategy.scope() if self.strategy else contextlib.nullcontext()

    def optimizer(self, optimizer):
        return self.hvd.DistributedOptimizer(optimizer) if self.hvd else optimizer

    def callbacks(self):
        """Rank 0's initial state on every rank, and metrics averaged over the ranks."""
        if self.hvd is None:
            return []
        return [self.hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                self.hvd.callbacks.MetricAverageCallback()]

    def tape(self, tape, **kwargs):
        """A custom loop's tape: the framework's DistributedGradientTape (ringd, Horovod)."""
        return self.tf_hvd.DistributedGradientTape(tape, **kwargs) if self.hvd else tape

    def distribute(self, dataset):
        """A dataset of this rank's shard, batched per rank, as the framework wants it: MWMS takes
        the global batch and splits it over the replicas, so its shard is batched at
        batch * size and not sharded again."""
        if self.strategy is None or self.coordinator is not None:
            return dataset
        options = self.tf.data.Options()
        options.experimental_distribute.auto_shard_policy = \
            self.tf.data.experimental.AutoShardPolicy.OFF
        return dataset.with_options(options)

    def global_batch(self, batch):
        return batch * self.size if self.strategy and not self.coordinator else batch

    def shutdown(self):
        if self.hvd is not None and self.framework == "ringd":
            self.hvd.shutdown()
        if self.coordinator is not None:  # the other ranks and every server end, then this one
            for connection in self._others:
                connection.close()
            for child in self._children:
                child.kill()
            sys.stdout.flush()
            sys.stderr.flush()
            # Not a normal exit: TensorFlow's coordinator would keep calling the servers gone.
            os._exit(0)
