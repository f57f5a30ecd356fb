"""ringd.tensorflow.keras with tf_keras (Keras 2: TF_USE_LEGACY_KERAS=1, as the test sets):
model.fit with DistributedOptimizer and the broadcast and metric callbacks ends with one process's
parameters on the global batch (SGD, Adam); the warm-up and schedule callbacks set Horovod's
learning rates. Each check writes "ok" or what went wrong (workers/common.py)."""

import os

import numpy as np
import tensorflow as tf

import ringd.tensorflow.keras as hvd
from common import Checks

hvd.init()
RANK, SIZE = hvd.rank(), hvd.size()
checks = Checks(RANK)
keras = tf.keras
BATCH, STEPS = 8, 6


def data():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(STEPS * BATCH * SIZE, 6)).astype(np.float32)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)
    rows = np.concatenate([np.arange(step * BATCH * SIZE + RANK * BATCH,
                                     step * BATCH * SIZE + (RANK + 1) * BATCH)
                           for step in range(STEPS)])
    return x, y, rows


def model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="tanh"),
                             keras.layers.Dense(1)])


def keras2_fit_matches_one_process():
    assert keras.__name__.startswith("tf_keras"), keras.__name__
    x, y, rows = data()
    for make_optimizer in (lambda: keras.optimizers.SGD(0.1), lambda: keras.optimizers.Adam(0.01)):
        mine = model(seed=RANK)
        mine.compile(optimizer=hvd.DistributedOptimizer(make_optimizer()), loss="mse")
        history = mine.fit(x[rows], y[rows], batch_size=BATCH, epochs=2, shuffle=False, verbose=0,
                           callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                                      hvd.callbacks.MetricAverageCallback()])
        reference = model(seed=0)
        reference.compile(optimizer=make_optimizer(), loss="mse")
        reference.fit(x, y, batch_size=BATCH * SIZE, epochs=2, shuffle=False, verbose=0)
        for a, b in zip(mine.get_weights(), reference.get_weights()):
            diff = np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-12)
            assert diff <= 1e-5, f"{type(mine.optimizer).__name__}: {diff}"
        losses = hvd.allgather_object(history.history["loss"])
        assert all(loss == losses[0] for loss in losses), losses


def learning_rate_callbacks():
    x, y, rows = data()
    seen = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(float(np.asarray(self.model.optimizer.learning_rate)))

    mine = model(seed=0)
    mine.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    # Warm-up over 2 epochs to 0.4, then x0.5 from epoch 2 on.
    mine.fit(x[rows], y[rows], batch_size=BATCH, epochs=3, shuffle=False, verbose=0,
             callbacks=[hvd.callbacks.LearningRateWarmupCallback(0.4, warmup_epochs=2),
                        hvd.callbacks.LearningRateScheduleCallback(0.4, 0.5, start_epoch=2),
                        Record()])
    expected = []
    for epoch in range(3):
        for batch in range(STEPS):
            at = epoch + batch / STEPS
            expected.append(0.4 / SIZE * (at * (SIZE - 1) / 2 + 1) if at < 2 else 0.2)
    np.testing.assert_allclose(seen, expected, rtol=1e-6)


for check in [keras2_fit_matches_one_process, learning_rate_callbacks]:
    checks.run(check.__name__, check)
checks.write()
hvd.shutdown()
os._exit(0)
