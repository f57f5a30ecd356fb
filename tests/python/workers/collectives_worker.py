"""Every collective of ringd.torch and ringd (NumPy) on the ranks of a torchrun-style job, each
checked against its closed form; see test_torch_collectives.py."""

import warnings

import numpy as np
import torch

import ringd
import ringd.torch as hvd
from common import Checks

TORCH_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                torch.int64, torch.uint8]
NUMPY_DTYPES = ["float32", "float64", "float16", "int32", "int64", "uint8"]
OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max,
       "Product": hvd.Product}
REFERENCE = {"Sum": np.sum, "Average": np.mean, "Min": np.min, "Max": np.max, "Product": np.prod}
SHAPES = [(), (0,), (7,), (33, 65)]


def pattern(shape):
    """1 or 2 per element: small enough that every op is exact in every dtype."""
    count = int(np.prod(shape)) if shape else 1
    return (np.arange(count) % 2 + 1).reshape(shape).astype(np.float64)


def rank_input(shape, rank):
    return np.asarray(pattern(shape) + rank % 2)


def expected(op_name, shape, size):
    return REFERENCE[op_name](np.stack([rank_input(shape, r) for r in range(size)]), axis=0)


def is_float(dtype):
    return dtype.is_floating_point


def check_allreduce_every_op_dtype_shape(rank, size):
    handles = {}
    for op_name, op in OPS.items():
        for dtype in TORCH_DTYPES:
            for shape in SHAPES:
                tensor = torch.from_numpy(rank_input(shape, rank)).to(dtype)
                name = f"t.{op_name}.{dtype}.{shape}"
                if op_name == "Average" and not is_float(dtype):
                    try:
                        hvd.allreduce_async_(tensor, name=name, op=op)
                    except hvd.InvalidArgumentError as error:
                        assert "avg" in str(error), str(error)
                        continue
                    raise AssertionError(f"{name}: average of integers was accepted")
                handles[(op_name, dtype, shape)] = (tensor, hvd.allreduce_async_(tensor, name=name,
                                                                                  op=op))
    for (op_name, dtype, shape), (tensor, handle) in handles.items():
        result = hvd.synchronize(handle)
        assert result is tensor
        want = expected(op_name, shape, size)
        got = result.double().numpy()
        assert got.shape == want.shape and np.array_equal(got, want), \
            f"{op_name} {dtype} {shape}: got {got.ravel()[:6]}, want {want.ravel()[:6]}"


def check_numpy_allreduce_every_op_dtype(rank, size):
    for op_name, op in OPS.items():
        for dtype in NUMPY_DTYPES:
            if op_name == "Average" and not dtype.startswith("float"):
                continue
            array = rank_input((5, 3), rank).astype(dtype)
            copy = ringd.allreduce(array, op=op, name=f"np.{op_name}.{dtype}")
            assert np.array_equal(array, rank_input((5, 3), rank).astype(dtype))  # untouched
            in_place = ringd.allreduce_(array, op=op, name=f"np_.{op_name}.{dtype}")
            assert in_place is array
            want = expected(op_name, (5, 3), size)
            assert np.array_equal(copy.astype(np.float64), want), (op_name, dtype, copy)
            assert np.array_equal(array.astype(np.float64), want), (op_name, dtype, array)


def check_numpy_broadcast_allgather_reducescatter(rank, size):
    array = np.full(4, float(rank))
    assert np.array_equal(ringd.broadcast(array, root_rank=size - 1), np.full(4, size - 1.0))
    assert np.array_equal(array, np.full(4, float(rank)))
    ringd.broadcast_(array, root_rank=1)
    assert np.array_equal(array, np.full(4, 1.0))
    gathered = ringd.allgather(np.full((rank + 1, 2), rank, np.int32))
    want = np.concatenate([np.full((r + 1, 2), r, np.int32) for r in range(size)])
    assert gathered.dtype == np.int32 and np.array_equal(gathered, want), gathered
    rows = np.arange(2 * size + 1, dtype=np.float64)[:, None] * np.ones((1, 3))
    mine = ringd.reducescatter(rows * (rank + 1), op=ringd.Sum)
    start, stop = ringd.collectives.scatter_rows(2 * size + 1, rank, size)
    assert np.array_equal(mine, rows[start:stop] * sum(range(1, size + 1))), mine
    group = ringd.grouped_allreduce([np.ones(3), np.full(2, rank, np.int64)], op=ringd.Sum)
    assert np.array_equal(group[0], np.full(3, size))
    assert np.array_equal(group[1], np.full(2, sum(range(size))))
    handle = ringd.allreduce_async(np.ones(2), op=ringd.Sum, name="np.async")
    assert np.array_equal(ringd.synchronize(handle), np.full(2, size))
    assert ringd.poll(handle)
    ringd.barrier()


def check_in_place_keeps_identity_and_handles_non_contiguous(rank, size):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    transposed = (base * (rank + 1)).t()  # non-contiguous
    assert not transposed.is_contiguous()
    result = hvd.allreduce_(transposed, op=hvd.Sum, name="noncontiguous.t")
    assert result is transposed
    assert torch.equal(transposed, base.t() * sum(range(1, size + 1)))
    strided = torch.zeros(10, dtype=torch.float64)
    strided[::2] = rank + 1.0
    view = strided[::2]
    hvd.allreduce_(view, op=hvd.Max, name="noncontiguous.step")
    assert torch.equal(strided[::2], torch.full((5,), float(size), dtype=torch.float64))
    assert torch.equal(strided[1::2], torch.zeros(5, dtype=torch.float64))  # untouched
    copy = hvd.allreduce(transposed, op=hvd.Min, name="noncontiguous.copy")
    assert copy.is_contiguous() and torch.equal(copy, transposed)
    offset = torch.arange(10, dtype=torch.float32)
    hvd.allreduce_(offset[3:6], op=hvd.Sum, name="storage.offset")
    assert offset[3:6].tolist() == [3.0 * size, 4.0 * size, 5.0 * size]
    assert offset[:3].tolist() == [0.0, 1.0, 2.0] and offset[6:].tolist() == [6.0, 7.0, 8.0, 9.0]


def check_in_place_bumps_the_autograd_version(rank, size):
    leaf = torch.ones(3, requires_grad=True)
    hidden = leaf * 2
    squared = hidden * hidden  # saves `hidden` for backward
    before = hidden._version
    hvd.allreduce_(hidden, op=hvd.Sum, name="version.allreduce_")
    assert hidden._version > before
    try:
        squared.sum().backward()
    except RuntimeError as error:
        assert "modified by an inplace operation" in str(error), str(error)
    else:
        raise AssertionError("backward used a tensor that allreduce_ overwrote, silently")
    target = torch.zeros(2)
    before = target._version
    hvd.broadcast_(target, root_rank=0, name="version.broadcast_")
    assert target._version > before


def check_broadcast_every_dtype(rank, size):
    for dtype in TORCH_DTYPES:
        for root in (0, size - 1):
            tensor = torch.full((3, 2), rank + 1).to(dtype)
            copy = hvd.broadcast(tensor, root_rank=root, name=f"b.{dtype}.{root}")
            assert torch.equal(tensor, torch.full((3, 2), rank + 1).to(dtype))
            assert torch.equal(copy, torch.full((3, 2), root + 1).to(dtype)), (dtype, copy)
            assert hvd.broadcast_(tensor, root, name=f"b_.{dtype}.{root}") is tensor
            assert torch.equal(tensor, copy)


def check_allgather_rows_differ_per_rank(rank, size):
    for dtype in TORCH_DTYPES:
        mine = torch.full((rank, 3), rank).to(dtype)  # rank 0 brings no rows
        gathered = hvd.allgather(mine, name=f"g.{dtype}")
        want = torch.cat([torch.full((r, 3), r).to(dtype) for r in range(size)])
        assert gathered.dtype == dtype and torch.equal(gathered, want), (dtype, gathered)
    handle = hvd.allgather_async(torch.tensor([rank]), name="g.async")
    assert torch.equal(hvd.synchronize(handle), torch.arange(size))
    transposed = torch.arange(6.0).reshape(2, 3).t() + rank
    gathered = hvd.allgather(transposed, name="g.noncontiguous")
    assert torch.equal(gathered, torch.cat([torch.arange(6.0).reshape(2, 3).t() + r
                                            for r in range(size)]))


def check_grouped_allreduce(rank, size):
    tensors = [torch.full((4,), rank + 1.0), torch.full((2, 2), rank, dtype=torch.int64),
               torch.ones(3, dtype=torch.bfloat16)]
    results = hvd.grouped_allreduce(tensors, op=hvd.Sum, name="group.copy")
    assert torch.equal(results[0], torch.full((4,), float(sum(range(1, size + 1)))))
    assert torch.equal(results[1], torch.full((2, 2), sum(range(size)), dtype=torch.int64))
    assert torch.equal(results[2], torch.full((3,), float(size), dtype=torch.bfloat16))
    handle = hvd.grouped_allreduce_async_(tensors, op=hvd.Max, name="group.in_place")
    assert all(a is b for a, b in zip(hvd.synchronize(handle), tensors))
    assert torch.equal(tensors[0], torch.full((4,), float(size)))


def check_reducescatter(rank, size):
    rows = 2 * size + 1
    tensor = torch.arange(rows * 2, dtype=torch.float32).reshape(rows, 2) * (rank + 1)
    mine = hvd.reducescatter(tensor, op=hvd.Sum, name="rs")
    total = torch.arange(rows * 2, dtype=torch.float32).reshape(rows, 2) * sum(range(1, size + 1))
    start = rank * 2 + min(rank, 1)
    assert torch.equal(mine, total[start:start + 2 + (1 if rank < 1 else 0)]), mine
    average = hvd.reducescatter(torch.full((size, 1), float(rank)), name="rs.avg")
    assert torch.equal(average, torch.full((1, 1), (size - 1) / 2))


def check_compression(rank, size):
    generator = torch.Generator().manual_seed(100 + rank)
    values = torch.randn(4096, generator=generator) * 10
    exact = sum(torch.randn(4096, generator=torch.Generator().manual_seed(100 + r)).double() * 10
                for r in range(size))
    plain = hvd.allreduce(values, op=hvd.Sum, name="c.none", compression=hvd.Compression.none)
    assert torch.allclose(plain.double(), exact, rtol=1e-6, atol=1e-4)
    # Each combining step rounds once to 16 bits (2^-11 fp16, 2^-8 bf16 relative to the partial
    # sum), so the error is bounded by size roundings of at most the sum of magnitudes.
    magnitude = sum(torch.randn(4096, generator=torch.Generator().manual_seed(100 + r)).double()
                    .abs() * 10 for r in range(size))
    for compression, unit in ((hvd.Compression.fp16, 2.0**-11), (hvd.Compression.bf16, 2.0**-8)):
        result = hvd.allreduce(values, op=hvd.Sum, name=f"c.{compression.wire}",
                               compression=compression)
        assert result.dtype == torch.float32
        error = ((result.double() - exact).abs() / magnitude).max()
        assert error <= size * unit, (compression.wire, float(error))
        assert not torch.equal(result, plain), f"{compression.wire}: nothing was compressed"

    class Halves:  # a Horovod-style compressor of one's own: runs in Python
        @staticmethod
        def compress(tensor):
            return tensor.half(), tensor.dtype

        @staticmethod
        def decompress(tensor, dtype):
            return tensor.to(dtype)

    custom = hvd.allreduce(values, op=hvd.Sum, name="c.custom", compression=Halves)
    assert torch.allclose(custom.double(), exact, rtol=1e-2, atol=0.5)


def check_scale_factors(rank, size):
    tensor = torch.full((3,), rank + 1.0)
    result = hvd.allreduce(tensor, op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0,
                           name="scaled")
    assert torch.equal(result, torch.full((3,), 2.0 * sum(range(1, size + 1))))
    assert torch.equal(tensor, torch.full((3,), rank + 1.0))


def check_objects(rank, size):
    value = {"rank": rank, "payload": list(range(rank * 100))}
    assert hvd.broadcast_object(value, root_rank=2 % size) == {
        "rank": 2 % size, "payload": list(range((2 % size) * 100))}
    everyone = hvd.allgather_object(value)
    assert everyone == [{"rank": r, "payload": list(range(r * 100))} for r in range(size)]


def check_autograd(rank, size):
    leaf = torch.full((3,), rank + 1.0, requires_grad=True)
    (hvd.allreduce(leaf, op=hvd.Sum, name="ag.allreduce") * (rank + 1)).sum().backward()
    assert torch.equal(leaf.grad, torch.full((3,), float(sum(range(1, size + 1)))))
    leaf = torch.full((rank + 1, 2), 1.0, requires_grad=True)
    gathered = hvd.allgather(leaf, name="ag.allgather")
    (gathered * (rank + 1)).sum().backward()
    assert torch.equal(leaf.grad, torch.full((rank + 1, 2), float(sum(range(1, size + 1)))))
    leaf = torch.ones(2, requires_grad=True)
    (hvd.broadcast(leaf, root_rank=1, name="ag.broadcast") * (rank + 1)).sum().backward()
    want = float(sum(range(1, size + 1))) if rank == 1 else 0.0
    assert torch.equal(leaf.grad, torch.full((2,), want))


def check_mismatched_shapes_fail_on_every_rank_naming_the_tensor(rank, size):
    try:
        hvd.allreduce(torch.zeros(4 + rank), name="mismatched.weight")
    except hvd.MismatchError as error:
        assert "mismatched.weight" in str(error), str(error)
    else:
        raise AssertionError("no MismatchError")
    after = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after.mismatch")  # still usable
    assert torch.equal(after, torch.full((2,), float(size)))


def check_poll_and_unnamed_calls(rank, size):
    handles = [hvd.allreduce_async(torch.full((2,), float(i)), op=hvd.Sum) for i in range(3)]
    results = [hvd.synchronize(handle) for handle in handles]
    assert [r.tolist() for r in results] == [[size * float(i)] * 2 for i in range(3)]
    handle = hvd.allreduce_async(torch.ones(1), op=hvd.Sum, name="polled")
    hvd.synchronize(handle)
    try:
        hvd.poll(handle)
    except ValueError:
        pass
    else:
        raise AssertionError("poll of a synchronized handle did not raise")
    handle = hvd.broadcast_async(torch.ones(1), 0, name="polled.2")
    while not hvd.poll(handle):
        pass
    assert hvd.synchronize(handle).tolist() == [1.0]
    hvd.barrier()


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    checks = Checks(rank)
    warnings.simplefilter("error")
    for name, body in list(globals().items()):
        if name.startswith("check_"):
            checks.run(name[len("check_"):], body, rank, size)
    checks.results["identity"] = (
        "ok" if (hvd.local_rank(), hvd.local_size(), hvd.cross_size()) == (rank, size, 1)
        else f"local {hvd.local_rank()}/{hvd.local_size()} cross {hvd.cross_size()}")
    checks.write()
    hvd.shutdown()


if __name__ == "__main__":
    main()
