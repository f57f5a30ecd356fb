"""ringd.tensorflow on 4 ranks: every op x dtype against NumPy, eagerly and inside tf.function;
broadcast/allgather of every plain dtype; compression; grouped allreduce; reducescatter;
DistributedGradientTape against one process on the global batch (SGD and Adam); IndexedSlices;
broadcast_variables; objects; the errors (unsupported dtypes, ranks that disagree). Each check
writes "ok" or what went wrong (workers/common.py)."""

import os

import numpy as np
import tensorflow as tf

import ringd.tensorflow as hvd
from common import Checks

hvd.init()
RANK, SIZE = hvd.rank(), hvd.size()
checks = Checks(RANK)

REDUCED = [np.float32, np.float64, np.float16, tf.bfloat16.as_numpy_dtype, np.int32, np.int64,
           np.uint8]
OPS = {hvd.Sum: np.sum, hvd.Min: np.min, hvd.Max: np.max, hvd.Product: np.prod,
       hvd.Average: None}


def both_modes(body):
    """body(run) with run(f, *args) calling f eagerly, then inside tf.function."""
    body(lambda f, *args: f(*args))
    body(lambda f, *args: tf.function(f)(*args))


def rank_input(rank, dtype, shape, low=1, high=4):
    rng = np.random.default_rng(1000 + rank)
    return rng.integers(low, high, size=shape).astype(dtype)


def every_op_dtype():
    def body(run):
        for op, reduce in OPS.items():
            for dtype in REDUCED:
                for shape in [(), (5,), (3, 4)]:
                    inputs = [rank_input(r, dtype, shape).astype(np.float64) for r in range(SIZE)]
                    if op == hvd.Average:
                        expected = np.sum(inputs, axis=0)
                        expected = (np.floor(expected / SIZE) if np.dtype(dtype).kind in "iu"
                                    else expected / SIZE)
                    else:
                        expected = reduce(inputs, axis=0)
                    mine = tf.constant(rank_input(RANK, dtype, shape))
                    got = run(lambda x: hvd.allreduce(x, op=op), mine)
                    assert got.dtype == mine.dtype and got.shape == mine.shape, (got, mine)
                    tolerance = 1e-2 if np.dtype(dtype).itemsize == 2 and dtype != np.int16 else 0
                    np.testing.assert_allclose(np.asarray(got.numpy(), np.float64), expected,
                                               rtol=tolerance, err_msg=f"{op} {dtype} {shape}")
    both_modes(body)


def scale_factors():
    def body(run):
        x = tf.constant(rank_input(RANK, np.float32, (4,)))
        got = run(lambda t: hvd.allreduce(t, op=hvd.Sum, prescale_factor=0.5,
                                          postscale_factor=3.0), x)
        expected = 1.5 * np.sum([rank_input(r, np.float32, (4,)) for r in range(SIZE)], axis=0)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)
    both_modes(body)


PLAIN = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8,
         np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128,
         tf.bfloat16.as_numpy_dtype]


def broadcast_and_allgather_every_dtype():
    def body(run):
        for dtype in PLAIN:
            root = SIZE - 1
            mine = rank_input(RANK, dtype, (2, 3), 0, 2)
            got = run(lambda t: hvd.broadcast(t, root_rank=root), tf.constant(mine))
            np.testing.assert_array_equal(got.numpy(), rank_input(root, dtype, (2, 3), 0, 2))
            rows = RANK + 1  # the first dimension differs per rank
            mine = rank_input(RANK, dtype, (rows, 2), 0, 2)
            got = run(hvd.allgather, tf.constant(mine))
            expected = np.concatenate([rank_input(r, dtype, (r + 1, 2), 0, 2)
                                       for r in range(SIZE)])
            np.testing.assert_array_equal(got.numpy(), expected)
        scalar = run(hvd.allgather, tf.constant(RANK, tf.int64))
        np.testing.assert_array_equal(scalar.numpy(), np.arange(SIZE))
    both_modes(body)


def unsupported_dtypes_are_named():
    for tensor, word in [(tf.constant([1], tf.int8), "int8"), (tf.constant([True]), "bool"),
                         (tf.constant([1 + 2j]), "complex128")]:
        try:
            hvd.allreduce(tensor, op=hvd.Sum)
        except TypeError as error:
            assert word in str(error), error
        else:
            raise AssertionError(f"allreduce of {word} did not fail")
    try:
        hvd.broadcast(tf.constant(["text"]), root_rank=0)
    except hvd.InvalidArgumentError as error:
        assert "no fixed size" in str(error), error
    else:
        raise AssertionError("broadcast of strings did not fail")


def compression():
    def body(run):
        for compression in (hvd.Compression.fp16, hvd.Compression.bf16):
            x = tf.constant(np.linspace(-2, 2, 1000, dtype=np.float32) * (RANK + 1))
            got = run(lambda t: hvd.allreduce(t, op=hvd.Sum, compression=compression), x)
            expected = np.linspace(-2, 2, 1000) * sum(range(1, SIZE + 1))
            rtol = 2e-3 if compression is hvd.Compression.fp16 else 2e-2
            np.testing.assert_allclose(got.numpy(), expected, rtol=rtol, atol=rtol)
    both_modes(body)


def grouped_and_reducescatter():
    def body(run):
        a = tf.constant(rank_input(RANK, np.float32, (3,)))
        b = tf.constant(rank_input(RANK, np.int64, (2, 2)))
        got = run(lambda x, y: hvd.grouped_allreduce([x, y], op=hvd.Sum), a, b)
        np.testing.assert_array_equal(got[0].numpy(), np.sum(
            [rank_input(r, np.float32, (3,)) for r in range(SIZE)], axis=0))
        np.testing.assert_array_equal(got[1].numpy(), np.sum(
            [rank_input(r, np.int64, (2, 2)) for r in range(SIZE)], axis=0))
        rows = 2 * SIZE + 1
        x = tf.constant(rank_input(RANK, np.float32, (rows, 2)))
        got = run(lambda t: hvd.reducescatter(t, op=hvd.Sum), x)
        total = np.sum([rank_input(r, np.float32, (rows, 2)) for r in range(SIZE)], axis=0)
        start = RANK * 2 + min(RANK, 1)
        np.testing.assert_array_equal(got.numpy(), total[start:start + 2 + (RANK < 1)])
    both_modes(body)


# A small network: the same initial weights on every rank (seeded), a global batch split by rank.
def make_variables():
    rng = np.random.default_rng(7)
    return [tf.Variable(rng.normal(size=(6, 8)).astype(np.float32), name="dense/kernel"),
            tf.Variable(np.zeros(8, np.float32), name="dense/bias"),
            tf.Variable(rng.normal(size=(8, 1)).astype(np.float32), name="out/kernel")]


def loss_of(variables, x, y):
    hidden = tf.tanh(x @ variables[0] + variables[1])
    return tf.reduce_mean(tf.square(hidden @ variables[2] - y))


def global_batch(step):
    rng = np.random.default_rng(100 + step)
    x = rng.normal(size=(8 * SIZE, 6)).astype(np.float32)
    return x, np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)


def tape_matches_one_process():
    for optimizer_class in (lambda: tf.keras.optimizers.SGD(0.1),
                            lambda: tf.keras.optimizers.Adam(0.01)):
        for graph in (False, True):
            mine, reference = make_variables(), make_variables()
            opt_mine, opt_reference = optimizer_class(), optimizer_class()

            def distributed_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_of(mine, x, y)
                gradients = hvd.DistributedGradientTape(tape).gradient(loss, mine)
                opt_mine.apply_gradients(zip(gradients, mine))

            def reference_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_of(reference, x, y)
                opt_reference.apply_gradients(zip(tape.gradient(loss, reference), reference))

            if graph:
                distributed_step = tf.function(distributed_step)
            for step in range(5):
                x, y = global_batch(step)
                shard = slice(RANK * 8, (RANK + 1) * 8)
                distributed_step(tf.constant(x[shard]), tf.constant(y[shard]))
                reference_step(tf.constant(x), tf.constant(y))
            for a, b in zip(mine, reference):
                diff = np.max(np.abs(a.numpy() - b.numpy())) / max(np.max(np.abs(b.numpy())), 1e-12)
                assert diff <= 1e-5, f"{type(opt_mine).__name__} graph={graph}: {diff}"


def predivide_and_groups():
    """gradient_predivide_factor, num_groups and groups change how the average is computed and
    sent, not what it is."""
    variables = make_variables()
    x, y = global_batch(0)
    shard = slice(RANK * 8, (RANK + 1) * 8)

    def gradients(**options):
        with tf.GradientTape() as tape:
            loss = loss_of(variables, tf.constant(x[shard]), tf.constant(y[shard]))
        return hvd.DistributedGradientTape(tape, **options).gradient(loss, variables)

    plain = gradients()
    for options in (dict(gradient_predivide_factor=2.0), dict(num_groups=2),
                    dict(groups=[[variables[0], variables[2]]])):
        for a, b in zip(gradients(**options), plain):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7,
                                       err_msg=str(options))


def indexed_slices():
    table = tf.Variable(np.arange(20, dtype=np.float32).reshape(10, 2))
    ids = tf.constant([RANK, RANK + 1, 9])

    def gradients(sparse_as_dense):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.gather(table, ids) * float(RANK + 1))
        return hvd.DistributedGradientTape(tape, sparse_as_dense=sparse_as_dense).gradient(
            loss, [table])[0]

    expected = np.zeros((10, 2))
    for r in range(SIZE):
        for index in (r, r + 1, 9):
            expected[index] += (r + 1) / SIZE
    sparse = gradients(False)
    assert isinstance(sparse, tf.IndexedSlices), type(sparse)
    np.testing.assert_allclose(tf.convert_to_tensor(sparse).numpy(), expected, rtol=1e-6)
    dense = gradients(True)
    assert not isinstance(dense, tf.IndexedSlices)
    np.testing.assert_allclose(dense.numpy(), expected, rtol=1e-6)


def broadcast_variables_and_objects():
    variables = [tf.Variable(rank_input(RANK, np.float32, (3, 3))),
                 tf.Variable(rank_input(RANK, np.int64, (2,)))]
    hvd.broadcast_variables(variables, root_rank=1)
    np.testing.assert_array_equal(variables[0].numpy(), rank_input(1, np.float32, (3, 3)))
    np.testing.assert_array_equal(variables[1].numpy(), rank_input(1, np.int64, (2,)))
    assert hvd.broadcast_object({"from": RANK}, root_rank=2) == {"from": 2}
    assert hvd.allgather_object(("rank", RANK)) == [("rank", r) for r in range(SIZE)]
    hvd.barrier()


def mismatched_shapes_are_named():
    shape = (3,) if RANK != 2 else (4,)
    try:
        hvd.allreduce(tf.ones(shape), name="disagrees")
    except hvd.MismatchError as error:
        assert "disagrees" in str(error) and "rank" in str(error), error
    else:
        raise AssertionError("no MismatchError")

    @tf.function
    def step(x):
        return hvd.allreduce(x, name="disagrees.graph")

    try:
        step(tf.ones(shape))
    except tf.errors.FailedPreconditionError as error:
        assert "[ringd:mismatch]" in error.message and "disagrees.graph" in error.message, error
    else:
        raise AssertionError("no op error in graph mode")
    # The job goes on.
    np.testing.assert_array_equal(hvd.allreduce(tf.ones([2]), op=hvd.Sum).numpy(), [SIZE] * 2)


def keras_fit_matches_one_process():
    import keras

    import ringd.keras as hvd_keras

    batch, steps = 8, 6
    rng = np.random.default_rng(5)
    x = rng.normal(size=(steps * batch * SIZE, 6)).astype(np.float32)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)
    # Rank r's rows of each global batch, in order.
    rows = np.concatenate([np.arange(step * batch * SIZE + RANK * batch,
                                     step * batch * SIZE + (RANK + 1) * batch)
                           for step in range(steps)])

    def model(seed):
        keras.utils.set_random_seed(seed)
        return keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="tanh"),
                                 keras.layers.Dense(1)])

    # (optimizer, DistributedOptimizer's keywords, the one-process reference's optimizer): with
    # backward_passes_per_step=2 the reference accumulates 2 global batches the same way.
    cases = [(lambda: keras.optimizers.SGD(0.1), {}, lambda: keras.optimizers.SGD(0.1)),
             (lambda: keras.optimizers.Adam(0.01), {}, lambda: keras.optimizers.Adam(0.01)),
             (lambda: keras.optimizers.Adam(0.01),
              dict(backward_passes_per_step=2, average_aggregated_gradients=True),
              lambda: keras.optimizers.Adam(0.01, gradient_accumulation_steps=2)),
             # Horovod's default: the passes summed (the reference's lr doubled: SGD is linear).
             (lambda: keras.optimizers.SGD(0.05), dict(backward_passes_per_step=2),
              lambda: keras.optimizers.SGD(0.1, gradient_accumulation_steps=2))]
    for make_optimizer, keywords, make_reference in cases:
        mine = model(seed=RANK)  # different initial weights: the callback makes them rank 0's
        mine.compile(optimizer=hvd_keras.DistributedOptimizer(make_optimizer(), **keywords),
                     loss="mse")
        history = mine.fit(x[rows], y[rows], batch_size=batch, epochs=2, shuffle=False, verbose=0,
                           callbacks=[hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0),
                                      hvd_keras.callbacks.MetricAverageCallback()])
        reference = model(seed=0)
        reference.compile(optimizer=make_reference(), loss="mse")
        reference.fit(x, y, batch_size=batch * SIZE, epochs=2, shuffle=False, verbose=0)
        for a, b in zip(mine.get_weights(), reference.get_weights()):
            diff = np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-12)
            assert diff <= 1e-5, f"{type(mine.optimizer).__name__} {keywords}: {diff}"
        losses = hvd.allgather_object(history.history["loss"])
        assert all(loss == losses[0] for loss in losses), losses  # averaged: the same everywhere


for check in [every_op_dtype, scale_factors, broadcast_and_allgather_every_dtype,
              unsupported_dtypes_are_named, compression, grouped_and_reducescatter,
              tape_matches_one_process, predivide_and_groups, indexed_slices,
              broadcast_variables_and_objects, mismatched_shapes_are_named,
              keras_fit_matches_one_process]:
    checks.run(check.__name__, check)
checks.write()
hvd.shutdown()
os._exit(0)  # TensorFlow's threads can make a normal exit slow
