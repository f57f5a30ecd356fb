#!/usr/bin/env python3
"""Synthetic data-parallel benchmark for TensorFlow, after Horovod's
tensorflow2_synthetic_benchmark and the PyTorch one beside it (examples/pytorch/): a model with a
real network's parameter tensors (data/gradient_profiles/: ResNet-50, VGG-16, BERT-base,
Inception V3) and modeled compute, so the figure is the communication's. Takes the PyTorch one's
flags and writes the same --json.

    mpirun -np 4 python examples/tensorflow/synthetic_benchmark.py --profile resnet50
    mpirun -np 4 python examples/tensorflow/synthetic_benchmark.py --framework mwms
    mpirun -np 4 python examples/tensorflow/synthetic_benchmark.py --framework ps --ps-tasks 2

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
import json
import os
import sys
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frameworks import FRAMEWORKS, Distributed  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read_profile(name_or_path):
    """[(tensor name, element count)] from a profile name or a .tsv path."""
    path = name_or_path
    if not os.path.exists(path):
        path = os.path.join(REPO, "data", "gradient_profiles", name_or_path + ".tsv")
    if not os.path.exists(path):
        raise SystemExit(f"--profile {name_or_path}: no such profile (resnet50, vgg16, bert_base, "
                         f"inception_v3, or a .tsv path)")
    tensors = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 2 or not fields[1].isdigit() or int(fields[1]) < 1:
                raise SystemExit(f"{path}:{number}: expected 'name<TAB>element count': {line!r}")
            tensors.append((fields[0], int(fields[1])))
    return tensors


def modeled_layer(tf, forward_s, backward_s):
    """y = x + w[0] * 0, waiting forward_s; its gradient waits backward_s and is dense."""

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
            return dy, tf.fill(tf.shape(w), 1e-3) * (dy + pause)

        return y, gradient

    return layer


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", choices=FRAMEWORKS, default="ringd")
    parser.add_argument("--profile", default="resnet50")
    parser.add_argument("--compute-ms", type=float, default=100.0,
                        help="modeled forward + backward time per step")
    parser.add_argument("--batch-size", type=int, default=32, help="images per step per rank")
    parser.add_argument("--num-warmup-batches", type=int, default=3)
    parser.add_argument("--num-batches-per-iter", type=int, default=5)
    parser.add_argument("--num-iters", type=int, default=5)
    parser.add_argument("--fp16-allreduce", action="store_true")
    parser.add_argument("--hosts", default="", help="mwms: comma-separated host per rank")
    parser.add_argument("--tf-port", type=int, default=23456,
                        help="mwms, ps: TensorFlow's base port")
    parser.add_argument("--ps-tasks", type=int, default=1, help="ps: parameter servers")
    parser.add_argument("--json", help="write the result here (rank 0)")
    args = parser.parse_args()
    if min(args.batch_size, args.num_batches_per_iter, args.num_iters) < 1 or \
            args.num_warmup_batches < 0 or not args.compute_ms >= 0:
        parser.error("sizes and counts must be at least 1 (warm-up 0), --compute-ms >= 0")

    import tensorflow as tf

    if args.framework == "ps" and args.compute_ms != 0:
        parser.error("--framework ps: --compute-ms must be 0 (its workers are other processes, "
                     "which cannot run the modeled compute's host functions)")
    dist = Distributed(args.framework, [h for h in args.hosts.split(",") if h], args.tf_port,
                       args.ps_tasks)
    tensors = read_profile(args.profile)
    total = sum(count for _, count in tensors)
    compute_s = args.compute_ms / 1000.0
    layers = [modeled_layer(tf, compute_s * count / total / 3, compute_s * count / total * 2 / 3)
              for _, count in tensors]
    with dist.scope():
        weights = [tf.Variable(tf.zeros([count]), name=name.replace(".", "_"))
                   for name, count in tensors]
    if args.fp16_allreduce and args.framework not in ("ringd", "horovod"):
        raise SystemExit(f"--fp16-allreduce: not with --framework {args.framework}")
    if dist.rank == 0:
        print(f"model: {args.profile} ({len(tensors)} tensors, {total / 1e6:.1f} M parameters, "
              f"{total * 4 / 2**20:.1f} MiB of gradients), modeled compute {args.compute_ms:g} "
              f"ms/step, batch {args.batch_size}/rank, {dist.size} ranks, {args.framework}",
              flush=True)

    def loss_and_tape():
        with tf.GradientTape() as tape:
            x = tf.zeros([])
            for layer, weight in zip(layers, weights):
                x = layer(x, weight)
        return x, tape

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

    for _ in range(args.num_warmup_batches):
        step()
    rates = []
    for i in range(args.num_iters):
        started = time.time()
        for _ in range(args.num_batches_per_iter):
            step()
        elapsed = time.time() - started
        rates.append(args.batch_size * args.num_batches_per_iter / elapsed)
        if dist.rank == 0:
            print(f"iter #{i}: {rates[-1]:.1f} img/s per rank "
                  f"({elapsed / args.num_batches_per_iter * 1000:.1f} ms/step)", flush=True)
    mean = float(np.mean(rates))
    interval = float(1.96 * np.std(rates))
    if dist.rank == 0:
        print(f"img/s per rank: {mean:.1f} +- {interval:.1f}")
        print(f"total img/s on {dist.size} ranks: {mean * dist.size:.1f} +- "
              f"{interval * dist.size:.1f}", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"framework": args.framework, "profile": args.profile,
                           "ranks": dist.size, "compute_ms": args.compute_ms,
                           "batch_size": args.batch_size, "img_per_s_per_rank": mean,
                           "interval": interval, "rates": rates}, f, indent=1)
    dist.shutdown()


if __name__ == "__main__":
    main()
