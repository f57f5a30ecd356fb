"""Horovod's Keras callbacks for Keras 3 (ringd.tensorflow.keras has the same for tf_keras, Keras 2,
on the same logic: the _* mixins here):

  BroadcastGlobalVariablesCallback(root_rank)  rank root_rank's model and optimizer variables on
                                               every rank when training begins (Keras 3 builds
                                               both before the first batch)
  MetricAverageCallback()                      each epoch's metrics (logs) averaged over the ranks
  LearningRateWarmupCallback(initial_lr, ...)  the learning rate ramped from initial_lr / size to
                                               initial_lr over the first warmup_epochs, per batch
  LearningRateScheduleCallback(initial_lr, multiplier, ...)  initial_lr * multiplier(epoch) within
                                               [start_epoch, end_epoch)

Put BroadcastGlobalVariablesCallback first and MetricAverageCallback before callbacks that read
the metrics (checkpointing, early stopping, TensorBoard). momentum_correction is accepted for
Horovod's signature and not applied: Keras 3's optimizers keep no momentum to correct outside
their own variables.
"""

import numpy as np
import keras

from ringd import _runtime
from ringd import collectives as numpy_collectives
from ringd.tensorflow.functions import broadcast_variables


class _BroadcastGlobalVariables:
    def __init__(self, root_rank, device=""):
        super().__init__()
        del device
        self.root_rank = root_rank

    def on_train_begin(self, logs=None):
        model = self.model
        if getattr(model, "optimizer", None) is not None and \
                not getattr(model.optimizer, "built", False):
            model.optimizer.build(model.trainable_variables)  # idempotent in tf_keras
        variables = list(model.variables)
        if getattr(model, "optimizer", None) is not None:
            variables += list(model.optimizer.variables)
        broadcast_variables(variables, self.root_rank)


class _MetricAverage:
    def __init__(self, device=""):
        super().__init__()
        del device

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        keys = sorted(key for key, value in logs.items() if np.ndim(value) == 0)
        values = np.array([float(logs[key]) for key in keys], dtype=np.float64)
        averaged = numpy_collectives.allreduce(
            values, op=_runtime.Average, name=f"keras.metric_average.{epoch}.{len(keys)}")
        for key, value in zip(keys, averaged):
            logs[key] = float(value)


class _LearningRate:
    """Sets the optimizer's learning rate at each batch from rate(epoch as a float)."""

    def __init__(self, initial_lr, steps_per_epoch, verbose):
        super().__init__()
        self.initial_lr = float(initial_lr)
        self.steps_per_epoch = steps_per_epoch
        self.verbose = verbose
        self.current_epoch = 0

    def rate(self, epoch):
        raise NotImplementedError

    def applies(self, epoch):
        return True

    def on_train_begin(self, logs=None):
        if self.steps_per_epoch is None:
            self.steps_per_epoch = (self.params or {}).get("steps")
        if not self.steps_per_epoch:
            raise ValueError("ringd.keras: pass steps_per_epoch= (model.fit did not say how many "
                             "batches an epoch has)")

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        epoch = self.current_epoch + batch / self.steps_per_epoch
        if self.applies(epoch):
            self.model.optimizer.learning_rate.assign(self.rate(epoch))

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = float(np.asarray(self.model.optimizer.learning_rate))


class _LearningRateWarmup(_LearningRate):
    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        super().__init__(initial_lr, steps_per_epoch, verbose)
        del momentum_correction
        self.warmup_epochs = warmup_epochs

    def applies(self, epoch):
        return epoch < self.warmup_epochs

    def rate(self, epoch):
        size = _runtime.size()
        return self.initial_lr / size * (epoch * (size - 1) / self.warmup_epochs + 1)

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.warmup_epochs - 1 and self.verbose and _runtime.rank() == 0:
            print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to "
                  f"{self.initial_lr:g}.")


class _LearningRateSchedule(_LearningRate):
    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None, verbose=0):
        super().__init__(initial_lr, steps_per_epoch, verbose)
        del momentum_correction
        self.multiplier = multiplier if callable(multiplier) else (lambda epoch: multiplier)
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase

    def applies(self, epoch):
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def rate(self, epoch):
        return self.initial_lr * self.multiplier(int(epoch) if self.staircase else epoch)


class BroadcastGlobalVariablesCallback(_BroadcastGlobalVariables, keras.callbacks.Callback):
    pass


class MetricAverageCallback(_MetricAverage, keras.callbacks.Callback):
    pass


class LearningRateWarmupCallback(_LearningRateWarmup, keras.callbacks.Callback):
    pass


class LearningRateScheduleCallback(_LearningRateSchedule, keras.callbacks.Callback):
    pass
