#!/usr/bin/env python3
"""A small CNN on Fashion-MNIST with Keras 3 and model.fit, data-parallel: each rank trains on its
share of every epoch and ringd.keras's DistributedOptimizer averages the gradients (or, with
--framework, TensorFlow's MultiWorkerMirroredStrategy or Horovod, so the comparison is the same
script under the same launcher line).

    mpirun -np 4 python examples/tensorflow/keras_fashion_mnist.py
    mpirun -np 4 python examples/tensorflow/keras_fashion_mnist.py --framework mwms
    mpirun -np 4 python examples/tensorflow/keras_fashion_mnist.py --tensorboard /tmp/tb

Reads the IDX files of Debian's dataset-fashion-mnist package (--data-dir for others): nothing
is downloaded. Rank 0 alone prints (one line per epoch: loss, test accuracy, time, samples/s),
checkpoints (--checkpoint) and writes TensorBoard logs (--tensorboard); --json writes the results.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "common")]
from example_common import FASHION_MNIST_DIR, fashion_mnist  # noqa: E402
from frameworks import FRAMEWORKS, Distributed, launcher_rank_and_size  # noqa: E402


def build_model(keras):
    """Two 5x5 convolutions (32, 64 channels) with max-pooling, then 3136 -> 128 -> 10."""
    layers = keras.layers
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(32, 5, padding="same", activation="relu"), layers.MaxPooling2D(),
        layers.Conv2D(64, 5, padding="same", activation="relu"), layers.MaxPooling2D(),
        layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dense(10)])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", choices=FRAMEWORKS, default="ringd")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--lr", type=float, default=1e-3,
                        help="Adam's for one rank; scaled by the square root of the ranks")
    parser.add_argument("--data-dir", default=FASHION_MNIST_DIR)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0,
                        help="TensorFlow threads per rank (0: cores / local ranks, at least 1)")
    parser.add_argument("--limit-train", type=int, default=0,
                        help="train on this many images per epoch (all ranks together; 0: all "
                        "60000): a quick smoke run")
    parser.add_argument("--hosts", default="", help="mwms: comma-separated host per rank")
    parser.add_argument("--tf-port", type=int, default=23456, help="mwms: TensorFlow's base port")
    parser.add_argument("--tensorboard", help="rank 0 writes TensorBoard logs here")
    parser.add_argument("--checkpoint", help="rank 0 saves the model here after each epoch "
                        "(.keras)")
    parser.add_argument("--json", help="write the per-epoch results here (rank 0)")
    args = parser.parse_args()
    if args.epochs < 1 or args.batch_size < 1 or not args.lr > 0 or args.limit_train < 0:
        parser.error("--epochs and --batch-size must be at least 1, --lr positive and "
                     "--limit-train at least 0")

    import tensorflow as tf

    _, launched = launcher_rank_and_size()
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE",
                               os.environ.get("LOCAL_WORLD_SIZE", str(launched))))
    threads = args.threads or max(1, (os.cpu_count() or 1) // max(1, local))
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(max(2, threads))
    dist = Distributed(args.framework, [h for h in args.hosts.split(",") if h], args.tf_port)
    keras = dist.keras

    keras.utils.set_random_seed(args.seed)
    train_x, train_y = fashion_mnist(args.data_dir, "train")
    test_x, test_y = fashion_mnist(args.data_dir, "test")
    train_x, test_x = train_x[..., None], test_x[..., None]  # channels last
    order = np.random.default_rng(args.seed).permutation(len(train_x))
    if args.limit_train:
        order = order[:args.limit_train]
    mine = order[dist.rank::dist.size]
    steps = len(order) // dist.size // args.batch_size  # the same on every rank
    mine = mine[:steps * args.batch_size]
    train = tf.data.Dataset.from_tensor_slices((train_x[mine], train_y[mine]))
    train = train.shuffle(len(mine), seed=args.seed + dist.rank, reshuffle_each_iteration=True)
    train = dist.distribute(train.batch(dist.global_batch(args.batch_size)).repeat())
    test = dist.distribute(tf.data.Dataset.from_tensor_slices((test_x, test_y))
                           .batch(dist.global_batch(500)))

    with dist.scope():
        model = build_model(keras)
        optimizer = dist.optimizer(keras.optimizers.Adam(args.lr * dist.size ** 0.5))
        model.compile(optimizer=optimizer,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])

    results = []

    class Report(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.time()

        def on_epoch_end(self, epoch, logs=None):
            # fit's own clock: from the epoch's first batch to after its evaluation.
            seconds = time.time() - self.started
            results.append({"epoch": epoch + 1, "loss": float(logs["loss"]),
                            "test_accuracy": float(logs["val_accuracy"]), "epoch_s": seconds,
                            "samples_per_s": steps * args.batch_size * dist.size / seconds})
            if dist.rank == 0:
                print(f"epoch {epoch + 1}/{args.epochs}  loss {logs['loss']:.4f}  test accuracy "
                      f"{logs['val_accuracy']:.4f}  {seconds:.1f} s  "
                      f"{results[-1]['samples_per_s']:.0f} samples/s  ({args.framework}, "
                      f"{dist.size} ranks)", flush=True)

    callbacks = dist.callbacks() + [Report()]
    if dist.rank == 0 and args.tensorboard:
        callbacks.append(keras.callbacks.TensorBoard(log_dir=args.tensorboard))
    if dist.rank == 0 and args.checkpoint:
        callbacks.append(keras.callbacks.ModelCheckpoint(args.checkpoint))
    started = time.time()
    # shuffle=False: the dataset shuffles itself (per rank, each epoch).
    model.fit(train, epochs=args.epochs, steps_per_epoch=steps, validation_data=test,
              shuffle=False, callbacks=callbacks, verbose=0)
    if dist.rank == 0:
        print(f"final test accuracy {results[-1]['test_accuracy']:.4f} after {args.epochs} "
              f"epochs in {time.time() - started:.1f} s", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"framework": args.framework, "ranks": dist.size, "seed": args.seed,
                           "batch_size": args.batch_size, "epochs": results}, f, indent=1)
    dist.shutdown()


if __name__ == "__main__":
    main()
