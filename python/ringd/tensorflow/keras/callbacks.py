"""Horovod's Keras callbacks for tf_keras (Keras 2): ringd.keras.callbacks' logic on tf_keras's
Callback (see that module)."""

import tf_keras

from ringd.keras.callbacks import (
    _BroadcastGlobalVariables,
    _LearningRateSchedule,
    _LearningRateWarmup,
    _MetricAverage,
)


class BroadcastGlobalVariablesCallback(_BroadcastGlobalVariables, tf_keras.callbacks.Callback):
    pass


class MetricAverageCallback(_MetricAverage, tf_keras.callbacks.Callback):
    pass


class LearningRateWarmupCallback(_LearningRateWarmup, tf_keras.callbacks.Callback):
    pass


class LearningRateScheduleCallback(_LearningRateSchedule, tf_keras.callbacks.Callback):
    pass
