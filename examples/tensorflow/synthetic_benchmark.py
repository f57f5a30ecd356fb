#!/usr/bin/env python3
"""Synthetic data-parallel benchmark for TensorFlow, after Horovod's
tensorflow2_synthetic_benchmark and the PyTorch one beside it (examples/pytorch/): a model with a
real network's parameter tensors (data/gradient_profiles/: ResNet-50, VGG-16, BERT-base,
Inception V3) and modeled compute, so the figure is the communication's. Takes the PyTorch one's
flags and writes the same --json.

    mpirun -np 4 python examples/tensorflow/synthetic_benchmark.py --profile resnet50
    mpirun -np 4 python examples/tensorflow/synthetic_benchmark.py --framework mwms
    mpirun -np 6 python examples/tensorflow/synthetic_benchmark.py --framework ps --ps-tasks 2 \
        --compute-ms 0                  # 4 workers, 2 parameter servers

The model: one variable per line of the profile (flat, the profile's element count). The forward
pass runs through them in order and the backward pass in reverse, as a network's would: each
tensor's backward waits its share of --compute-ms (two thirds of it; the forward the other third,
shares proportional to the tensor's size: a GPU's time, which leaves the CPU to the communication)
and produces a dense gradient. The step is one tf.function: ringd's DistributedGradientTape, or
MultiWorkerMirroredStrategy's run() with its optimizer's all-reduce, then plain SGD. The waits are
stateless host functions, so they never order the frameworks' collectives behind them. Under
ParameterServerStrategy the coordinator schedules one step per worker and rank at a time (its
steps are asynchronous: each worker pulls the variables, pushes its gradients; img/s per rank is
the steps all workers completed); its workers cannot run the host functions, so it takes
--compute-ms 0 (the communication alone).
Prints images/s per rank (--batch-size images per step), mean and 95% interval over --num-iters.
"""
import argparse
import os
import sys
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "common")]
from example_common import (  # noqa: E402
    add_synthetic_flags,
    check_synthetic_flags,
    describe_model,
    read_profile,
    run_synthetic,
)
from frameworks import FRAMEWORKS, Distributed  # noqa: E402


def modeled_layer(tf, forward_s, backward_s):
    """y = x + w[0] * 0, waiting forward_s; its gradient waits backward_s, is dense and depends on
    w."""

    def wait(seconds):
        def host(x):
            time.sleep(seconds)
            return np.float32(0)
        return host

    @tf.custom_gradient
    def layer(x, w):
        pause = tf.numpy_function(wait(forward_s), [x], tf.float32, stateful=False) \
            if forward_s > 0 else 0.0
        y = x + w[0] * 0 + pause

        def gradient(dy):
            pause = tf.numpy_function(wait(backward_s), [dy], tf.float32, stateful=False) \
                if backward_s > 0 else 0.0
            # + w * 1e-6: every gradient depends on its own weight. Gradients alike in shape and
            # value would let TensorFlow's graph optimizer merge them (common subexpressions),
            # and with them allreduce ops that are not stateful (Horovod's); and under
            # ParameterServerStrategy it makes each worker read the weight, as a network does.
            return dy, tf.fill(tf.shape(w), 1e-3) * (dy + pause) + w * 1e-6

        return y, gradient

    return layer


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", choices=FRAMEWORKS, default="ringd")
    add_synthetic_flags(parser)
    parser.add_argument("--hosts", default="", help="mwms: comma-separated host per rank")
    parser.add_argument("--tf-port", type=int, default=23456,
                        help="mwms, ps: TensorFlow's base port")
    parser.add_argument("--ps-tasks", type=int, default=1, help="ps: parameter servers")
    parser.add_argument("--ps-placement", choices=("dedicated", "colocated"), default="dedicated",
                        help="ps: the servers on ranks of their own (default), or beside workers")
    args = parser.parse_args()
    check_synthetic_flags(parser, args)

    import tensorflow as tf

    if args.framework == "ps" and args.compute_ms != 0:
        parser.error("--framework ps: --compute-ms must be 0 (its workers are other processes, "
                     "which cannot run the modeled compute's host functions)")
    dist = Distributed(args.framework, [h for h in args.hosts.split(",") if h], args.tf_port,
                       args.ps_tasks, args.ps_placement)
    tensors = read_profile(args.profile)
    total = sum(count for _, count in tensors)
    compute_s = args.compute_ms / 1000.0
    layers = [modeled_layer(tf, compute_s * count / total / 3, compute_s * count / total * 2 / 3)
              for _, count in tensors]
    with dist.scope():
        weights = [tf.Variable(tf.zeros([count]), name=name.replace(".", "_"))
                   for name, count in tensors]
        # The loss is scaled by a variable's value, read at every step, so no gradient is a
        # constant: TensorFlow's graph optimizer folds constant subgraphs, and an allreduce op
        # that is not stateful (Horovod's) would be folded away with them and never communicate.
        anchor = tf.Variable(1.0, trainable=False, name="anchor")
    if args.fp16_allreduce and args.framework not in ("ringd", "horovod"):
        raise SystemExit(f"--fp16-allreduce: not with --framework {args.framework}")
    if dist.rank == 0:
        describe_model(args, tensors, dist.size)

    def loss_and_tape():
        with tf.GradientTape() as tape:
            x = tf.zeros([])
            for layer, weight in zip(layers, weights):
                x = layer(x, weight)
            loss = x * anchor
        return loss, tape

    lr = 0.01
    if dist.coordinator is not None:
        with dist.scope():
            optimizer = dist.keras.optimizers.SGD(lr)

        @tf.function
        def worker_step():
            def replica_step():
                loss, tape = loss_and_tape()
                optimizer.apply_gradients(zip(tape.gradient(loss, weights), weights))
            dist.strategy.run(replica_step)

        def step():  # one step per worker, then all of them done
            for _ in range(dist.size):
                dist.coordinator.schedule(worker_step)
            dist.coordinator.join()
    elif dist.strategy is not None:
        with dist.scope():
            optimizer = dist.keras.optimizers.SGD(lr)

        def replica_step():
            loss, tape = loss_and_tape()
            optimizer.apply_gradients(zip(tape.gradient(loss, weights), weights))

        @tf.function
        def step():
            dist.strategy.run(replica_step)
    else:
        compression = {}
        if args.fp16_allreduce:
            compression["compression"] = dist.tf_hvd.Compression.fp16

        @tf.function
        def step():
            loss, tape = loss_and_tape()
            tape = dist.tape(tape, **compression)
            for weight, gradient in zip(weights, tape.gradient(loss, weights)):
                weight.assign_sub(lr * gradient)

    run_synthetic(step, args, dist.rank, dist.size)
    dist.shutdown()


if __name__ == "__main__":
    main()
