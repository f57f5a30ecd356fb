"""DistributedGradientTape, and the averaging of a list of gradients that it and
ringd.keras.DistributedOptimizer share (allreduce_gradients).

Each dense gradient gets its own submission, made in reverse order of the variables (backprop
produces the last layer's gradient first, and inside tf.function stateful ops run in program
order), so the engine fuses and sends early gradients while TensorFlow still computes the rest;
one wait for all of them follows. Names: "gradient.<index>.<variable path>", the same on every
rank and at every step (the engine's response cache then skips negotiation).
"""

import tensorflow as tf

from ringd import _runtime
from ringd._core import InvalidArgumentError
from ringd._runtime import Average, Sum, check_op
from ringd.tensorflow import _ops
from ringd.tensorflow.collectives import check_process_set, sparse_allreduce, start_allreduce
from ringd.tensorflow.compression import Compression


def _variable_path(variable, index):
    path = getattr(variable, "path", None) or getattr(variable, "name", None)
    return str(path) if path else str(index)


def _group_of(variables, num_groups, groups):
    """The group number of each variable (None: alone)."""
    if groups is not None:
        where = {}
        for number, members in enumerate(groups):
            for member in members:
                where[id(member)] = number
        return [where.get(id(variable)) for variable in variables]
    if num_groups and num_groups > 0:
        per_group = -(-len(variables) // num_groups)
        return [index // per_group for index in range(len(variables))]
    return [None] * len(variables)


def allreduce_gradients(gradients, variables, op=Average, compression=Compression.none,
                        sparse_as_dense=False, gradient_predivide_factor=1.0, num_groups=0,
                        groups=None, prefix="gradient", postscale_factor=1.0):
    """`op` over every rank's gradients (a list, None entries kept), dense ones multiplied by
    postscale_factor after; eager or in tf.function."""
    op = check_op(op)
    prescale, postscale = 1.0, postscale_factor
    if gradient_predivide_factor != 1.0:
        if op != Average:
            raise InvalidArgumentError("ringd: gradient_predivide_factor needs op=Average")
        # As Horovod: divide by the factor before the sum, by size / factor after it.
        prescale = 1.0 / gradient_predivide_factor
        postscale *= gradient_predivide_factor / _runtime.size()
        op = Sum
    gradients = list(gradients)
    variables = list(variables)
    group_of = _group_of(variables, num_groups, groups)
    names = [f"{prefix}.{index}.{_variable_path(variable, index)}"
             for index, variable in enumerate(variables)]
    results = list(gradients)
    pending = []  # (indices, PendingAllreduce)
    grouped = {}
    for index in reversed(range(len(gradients))):
        gradient = gradients[index]
        if gradient is None:
            continue
        if isinstance(gradient, tf.IndexedSlices):
            if not sparse_as_dense:
                results[index] = sparse_allreduce(gradient, names[index], op)
                continue
            gradient = tf.convert_to_tensor(gradient)
        if group_of[index] is not None:
            grouped.setdefault(group_of[index], []).append((index, gradient))
            continue
        pending.append(([index], start_allreduce([gradient], [names[index]], op, compression,
                                                 prescale, postscale)))
    for number, members in sorted(grouped.items()):
        members.reverse()
        indices = [index for index, _ in members]
        group = f"{prefix}.group{number}"
        pending.append((indices, start_allreduce(
            [gradient for _, gradient in members], [names[index] for index in indices], op,
            compression, prescale, postscale, group=group)))
    outputs = _ops.wait([item.submitted for _, item in pending])
    for (indices, item), output in zip(pending, outputs):
        for index, result in zip(indices, item.finish(output)):
            results[index] = result
    return results


class DistributedGradientTape:
    """A tf.GradientTape whose gradient() returns every rank's gradients averaged (`op`).

        with tf.GradientTape() as tape:
            loss = ...
        tape = hvd.DistributedGradientTape(tape)
        gradients = tape.gradient(loss, model.trainable_variables)

    Everything but gradient() is the wrapped tape's. sparse_as_dense: tf.IndexedSlices gradients
    (embeddings) are densified and allreduced; otherwise gathered (Horovod's rule).
    num_groups / groups: gradients allreduced in groups (each runs once all its members are ready).
    """

    def __init__(self, gradtape, device_dense="", device_sparse="",
                 compression=Compression.none, sparse_as_dense=False, op=Average,
                 gradient_predivide_factor=1.0, num_groups=0, groups=None, process_set=None,
                 scale_local_gradients=True):
        del device_dense, device_sparse, scale_local_gradients
        check_process_set(process_set)
        self._tape = gradtape
        self._options = dict(op=check_op(op), compression=compression,
                             sparse_as_dense=sparse_as_dense,
                             gradient_predivide_factor=gradient_predivide_factor,
                             num_groups=num_groups, groups=groups)

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, *exc):
        return self._tape.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self._tape, name)

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE):
        gradients = self._tape.gradient(target, sources, output_gradients=output_gradients,
                                        unconnected_gradients=unconnected_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat_gradients = tf.nest.flatten(gradients, expand_composites=False)
        reduced = allreduce_gradients(flat_gradients, flat_sources, **self._options)
        return tf.nest.pack_sequence_as(gradients, reduced)
