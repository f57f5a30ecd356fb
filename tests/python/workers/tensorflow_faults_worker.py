"""A rank killed during model.fit (argv[2] = "fit") or during a tf.function step of
DistributedGradientTape (argv[2] = "tape"): rank 1 exits hard at its 4th batch; every other rank
must see its training fail with ringd's peer-lost error (in graph mode TensorFlow's op error
carrying "[ringd:peer_lost]") and exit 3 after printing it. Exit 0 would mean training went on."""

import os
import sys

import numpy as np
import tensorflow as tf

import ringd.tensorflow as hvd

hvd.init()
RANK = hvd.rank()
mode = sys.argv[2]


def die_at_batch_4(batch):
    if RANK == 1 and batch == 4:
        os._exit(9)


try:
    if mode == "fit":
        import keras

        import ringd.keras as hvd_keras

        class Die(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                die_at_batch_4(batch)

        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        model.compile(optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.1)),
                      loss="mse")
        x = np.ones((512, 4), np.float32)
        model.fit(x, x[:, :1], batch_size=8, epochs=1, verbose=0, callbacks=[Die()])
    else:
        variable = tf.Variable(tf.ones([1000]))

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(variable * variable)
            gradient = hvd.DistributedGradientTape(tape).gradient(loss, [variable])[0]
            variable.assign_sub(0.01 * gradient)

        for batch in range(64):
            die_at_batch_4(batch)
            step()
except (tf.errors.OpError, hvd.RingdError) as error:
    text = getattr(error, "message", None) or str(error)
    print(f"rank {RANK}: training failed: {type(error).__name__}: {text}", flush=True)
    os._exit(3)
print(f"rank {RANK}: training ended normally", flush=True)
os._exit(0)
