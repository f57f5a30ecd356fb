"""DistributedOptimizer for Keras 3 and tf_keras (Keras 2): the given optimizer's class, averaging
the gradients across the ranks before clipping, weight decay and the update, as on one process
with the global batch.

Where: Keras 3's optimizers run `_clip_gradients(grads)` once per update, right before the
update, in both of their paths (every batch, or every N-th with gradient_accumulation_steps);
the gradients are allreduced there (ringd.tensorflow.gradient_tape.allreduce_gradients: one
submission per gradient, last layer first, then one wait), so with backward_passes_per_step=N
they cross the network once per N batches, Horovod's local aggregation. An optimizer class
without that method (a Keras that renamed it) averages in apply() instead, every batch.
tf_keras's optimizers (Keras 2's, which model.fit reaches through minimize and apply_gradients)
average in apply_gradients; they have no gradient accumulation, so backward_passes_per_step is 1.
"""

from ringd._runtime import Average
from ringd.tensorflow.collectives import check_process_set
from ringd.tensorflow.compression import Compression
from ringd.tensorflow.gradient_tape import allreduce_gradients


class _Distributed:
    """Mixed in front of the optimizer's own class."""

    _ringd_in_clip = True  # the class has _clip_gradients (set per class below)

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        variables = (list(trainable_variables) if trainable_variables is not None
                     else list(self._trainable_variables))
        if not self._ringd_in_clip:
            self._ringd_variables = variables
            grads = self._ringd_allreduce(grads)
        else:
            # What reaches _clip_gradients: Keras drops the variables without a gradient first.
            self._ringd_variables = [v for g, v in zip(grads, variables) if g is not None]
        return super().apply(grads, trainable_variables)

    def _clip_gradients(self, grads):
        if self._ringd_in_clip:
            grads = self._ringd_allreduce(list(grads))
        return super()._clip_gradients(grads)

    def _ringd_allreduce(self, grads):
        return allreduce_gradients(grads, self._ringd_variables, prefix="keras.gradient",
                                   **self._ringd_options)


class _DistributedKeras2:
    """Mixed in front of a tf_keras (Keras 2) optimizer's class."""

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        pairs = list(grads_and_vars)
        variables = [variable for _, variable in pairs]
        grads = allreduce_gradients([grad for grad, _ in pairs], variables,
                                    prefix="keras.gradient", **self._ringd_options)
        return super().apply_gradients(list(zip(grads, variables)), *args, **kwargs)


def _is_keras2(optimizer):
    return type(optimizer).__module__.startswith("tf_keras.")


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",  # noqa: N802
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=None, scale_local_gradients=True):
    """A new optimizer of `optimizer`'s class and configuration whose updates (apply,
    apply_gradients, model.fit) use the gradients averaged across the ranks.

    backward_passes_per_step=N: the gradients of N batches are aggregated locally (Keras 3's
    gradient_accumulation_steps) and cross the network once, before the update; summed over the
    N passes, or averaged with average_aggregated_gradients=True (Horovod's rule).
    """
    del device_dense, device_sparse, scale_local_gradients
    check_process_set(process_set)
    passes = int(backward_passes_per_step)
    if passes < 1:
        raise ValueError(f"ringd.keras: backward_passes_per_step={backward_passes_per_step}: "
                         "at least 1")
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    base = type(optimizer)
    if _is_keras2(optimizer):
        if passes > 1:
            raise NotImplementedError("ringd.keras: backward_passes_per_step > 1 needs Keras 3's "
                                      "gradient accumulation; tf_keras optimizers have none")
        cls = type(base.__name__, (_DistributedKeras2, base), {})
    else:
        if passes > 1:
            config["gradient_accumulation_steps"] = passes
        cls = type(base.__name__, (_Distributed, base),
                   {"_ringd_in_clip": hasattr(base, "_clip_gradients")})
    distributed = cls.from_config(config)
    # Keras averages the N passes; Horovod's default is their sum.
    postscale = 1.0 if passes == 1 or average_aggregated_gradients else float(passes)
    if postscale != 1.0 and gradient_predivide_factor != 1.0:
        raise ValueError("ringd.keras: gradient_predivide_factor with backward_passes_per_step > 1 "
                         "needs average_aggregated_gradients=True")
    distributed._ringd_options = dict(
        op=op, compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor, num_groups=num_groups,
        groups=groups, postscale_factor=postscale)
    return distributed
