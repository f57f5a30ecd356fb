"""DistributedOptimizer for Keras 3: the given optimizer's class, with apply() averaging the
gradients across the ranks first (ringd.tensorflow.gradient_tape.allreduce_gradients: one
submission per gradient, last layer first, then one wait), so clipping, loss scaling and the
update itself see the average, as on one process with the global batch."""

from ringd._runtime import Average
from ringd.tensorflow.collectives import check_process_set
from ringd.tensorflow.compression import Compression
from ringd.tensorflow.gradient_tape import allreduce_gradients


class _Distributed:
    """Mixed in front of the optimizer's own class."""

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        variables = (list(trainable_variables) if trainable_variables is not None
                     else list(self._trainable_variables))
        reduced = allreduce_gradients(grads, variables, prefix="keras.gradient",
                                      **self._ringd_options)
        return super().apply(reduced, trainable_variables)


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",  # noqa: N802
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=None, scale_local_gradients=True):
    """A new optimizer of `optimizer`'s class and configuration whose apply() (and so
    apply_gradients and model.fit) averages the gradients across the ranks first.

    backward_passes_per_step=N: the optimizer steps every N batches on the mean of their
    averaged gradients (Keras 3's own gradient_accumulation_steps; the gradients still cross the
    network at every batch: this saves optimizer steps, not communication).
    average_aggregated_gradients is accepted for Horovod's signature (Keras averages the passes).
    """
    del device_dense, device_sparse, average_aggregated_gradients, scale_local_gradients
    check_process_set(process_set)
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    if backward_passes_per_step > 1:
        config["gradient_accumulation_steps"] = int(backward_passes_per_step)
    base = type(optimizer)
    cls = type(base.__name__, (_Distributed, base), {})
    distributed = cls.from_config(config)
    distributed._ringd_options = dict(
        op=op, compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor, num_groups=num_groups,
        groups=groups)
    return distributed
