"""torch.distributed's own API on the backend "ringd" (ringd.torch.process_group), in a
torchrun-style job: init_process_group("ringd"), every supported collective against its closed
form, async Work, DDP against one process on the global batch, and the errors; see
test_torch_process_group.py."""

import copy
import os

import torch
import torch.distributed as dist
import torch.nn as nn

import ringd.torch as hvd
from common import Checks
from ringd.torch.process_group import ProcessGroupRingd

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64]
OPS = {dist.ReduceOp.SUM: sum, dist.ReduceOp.MIN: min, dist.ReduceOp.MAX: max}


def values(rank, dtype):
    """Rank r's tensor: 7 elements of r + 1 + (i % 3), exact in every dtype and op."""
    return (torch.arange(7) % 3 + rank + 1).to(dtype)


def check_backend(rank, size):
    assert dist.get_backend() == "ringd", dist.get_backend()
    assert (dist.get_rank(), dist.get_world_size()) == (rank, size)
    assert hvd.is_initialized() and (hvd.rank(), hvd.size()) == (rank, size)


def check_all_reduce_ops(rank, size):
    for dtype in DTYPES:
        every = [values(r, dtype) for r in range(size)]
        for op, reference in OPS.items():
            tensor = values(rank, dtype)
            dist.all_reduce(tensor, op=op)
            want = torch.stack(every).to(torch.float64)
            want = {sum: want.sum(0), min: want.min(0).values, max: want.max(0).values}[reference]
            assert torch.equal(tensor.to(torch.float64), want), (dtype, op, tensor, want)
        product = values(rank, dtype)
        dist.all_reduce(product, op=dist.ReduceOp.PRODUCT)
        assert torch.equal(product, torch.stack(every).prod(0).to(dtype)), (dtype, product)
    average = values(rank, torch.float32)
    dist.all_reduce(average, op=dist.ReduceOp.AVG)
    want = torch.stack([values(r, torch.float32) for r in range(size)]).mean(0)
    assert torch.allclose(average, want), (average, want)
    # Non-contiguous: the result lands in the caller's strided view.
    base = torch.zeros(7, 2)
    view = base[:, 0]
    view.copy_(values(rank, torch.float32))
    dist.all_reduce(view)
    assert torch.equal(base[:, 0], torch.stack([values(r, torch.float32)
                                                for r in range(size)]).sum(0))
    assert torch.equal(base[:, 1], torch.zeros(7)), "the other column was written"


def check_broadcast_all_gather_reduce_scatter(rank, size):
    tensor = values(rank, torch.float64)
    dist.broadcast(tensor, src=size - 1)
    assert torch.equal(tensor, values(size - 1, torch.float64)), tensor
    outputs = [torch.empty(2, 3) for _ in range(size)]
    dist.all_gather(outputs, torch.full((2, 3), float(rank)))
    for r, output in enumerate(outputs):
        assert torch.equal(output, torch.full((2, 3), float(r))), (r, output)
    inputs = [torch.full((3,), float(rank * 10 + part)) for part in range(size)]
    mine = torch.empty(3)
    dist.reduce_scatter(mine, inputs)
    want = float(sum(r * 10 + rank for r in range(size)))
    assert torch.equal(mine, torch.full((3,), want)), (mine, want)
    reduced = values(rank, torch.int64)
    dist.reduce(reduced, dst=0)
    if rank == 0:
        assert torch.equal(reduced, torch.stack([values(r, torch.int64)
                                                 for r in range(size)]).sum(0)), reduced


def check_objects_and_barrier(rank, size):
    gathered = [None] * size
    dist.all_gather_object(gathered, {"rank": rank, "name": f"r{rank}" * (rank + 1)})
    assert gathered == [{"rank": r, "name": f"r{r}" * (r + 1)} for r in range(size)], gathered
    objects = [f"from {rank}", rank] if rank == 1 else [None, None]
    dist.broadcast_object_list(objects, src=1)
    assert objects == ["from 1", 1], objects
    for _ in range(3):
        dist.barrier()


def check_async_work(rank, size):
    tensors = [values(rank, torch.float32) * (i + 1) for i in range(5)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    futures = [work.get_future() for work in works[:2]]
    for work in works[2:]:
        assert work.wait()
    for future in futures:
        future.wait()
    total = torch.stack([values(r, torch.float32) for r in range(size)]).sum(0)
    for i, tensor in enumerate(tensors):
        assert torch.equal(tensor, total * (i + 1)), (i, tensor)


def model_and_data(seed=5):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                          nn.Linear(16, 3))
    inputs = torch.randn(40, 12)
    labels = torch.randint(0, 3, (40,))
    return model, inputs, labels


def relative_difference(a, b):
    flat_a = torch.cat([p.detach().reshape(-1) for p in a.parameters()])
    flat_b = torch.cat([p.detach().reshape(-1) for p in b.parameters()])
    return ((flat_a - flat_b).norm() / flat_b.norm()).item()


def check_ddp_matches_one_process(rank, size):
    """DDP over the ringd group, each rank on its slice of every batch, ends where one process on
    the whole batch ends (SGD with momentum and Adam, 8 steps); DDP's first broadcast makes the
    ranks' differently seeded replicas rank 0's. The buckets' all_reduces return before ringd
    finishes them (overlapping the backward pass); every other call here waits."""
    group = dist.distributed_c10d._get_default_group()
    assert isinstance(group, ProcessGroupRingd), type(group)
    overlapped = group.overlapped_calls
    for make_optimizer in (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                           lambda p: torch.optim.Adam(p, lr=0.01)):
        reference, inputs, labels = model_and_data()
        local, _, _ = model_and_data(seed=5 + rank)  # rank 0's is the reference's start
        ddp = nn.parallel.DistributedDataParallel(local, bucket_cap_mb=0.001)
        ddp_optimizer = make_optimizer(ddp.parameters())
        reference_optimizer = make_optimizer(reference.parameters())
        loss = nn.CrossEntropyLoss()
        per_rank = inputs.shape[0] // size
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        whole = slice(0, per_rank * size)
        for _ in range(8):
            ddp_optimizer.zero_grad()
            loss(ddp(inputs[mine]), labels[mine]).backward()
            ddp_optimizer.step()
            reference_optimizer.zero_grad()
            loss(reference(inputs[whole]), labels[whole]).backward()
            reference_optimizer.step()
        difference = relative_difference(local, reference)
        assert difference <= 1e-5, f"{type(ddp_optimizer).__name__}: {difference:.3g}"
        untouched = copy.deepcopy(model_and_data()[0])
        assert relative_difference(local, untouched) > 1e-3, "the parameters did not move"
    # At least one bucket per step of each run (2 x 8); bucket_cap_mb 0.001 makes several.
    assert group.overlapped_calls - overlapped >= 16, group.overlapped_calls - overlapped


def check_groups(rank, size):
    """new_group() of every rank is a group of its own names; one of some ranks is made (every
    rank gets past new_group) and its members' first collective raises, naming the ranks."""
    everyone = dist.new_group(list(range(size)))
    tensor = values(rank, torch.float32)
    dist.all_reduce(tensor, group=everyone)
    assert torch.equal(tensor, torch.stack([values(r, torch.float32) for r in range(size)]).sum(0))
    some = dist.new_group([0, 1])
    if rank in (0, 1):
        try:
            dist.all_reduce(torch.ones(2), group=some)
        except NotImplementedError as error:
            assert "ranks [0, 1] out of 3" in str(error), str(error)
        else:
            raise AssertionError("a collective of a group of some ranks returned")
    dist.barrier()


def check_mismatch_raises_naming_the_call(rank, size):
    tensor = torch.ones(5 + rank)  # another shape on every rank
    try:
        dist.all_reduce(tensor)
    except RuntimeError as error:
        text = str(error)
        assert "torch.0.allreduce." in text, text
        return
    raise AssertionError("an all_reduce of different shapes returned")


def check_unsupported_calls_name_themselves(rank, size):
    for call in (lambda: dist.gather(torch.ones(2), [torch.ones(2)] * size if rank == 0 else None),
                 lambda: dist.all_to_all_single(torch.empty(size), torch.ones(size))):
        try:
            call()
        except NotImplementedError as error:
            assert "not supported by the ringd backend" in str(error), str(error)
        else:
            raise AssertionError("an unsupported call returned")
    try:
        dist.all_reduce(torch.ones(2), op=dist.ReduceOp.BAND)
    except NotImplementedError as error:
        assert "reduce op" in str(error), str(error)
    else:
        raise AssertionError("BAND returned")
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.int8))
    except TypeError as error:
        assert "torch.int8" in str(error), str(error)
    else:
        raise AssertionError("an int8 tensor was reduced")


def main():
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("ringd")
    checks = Checks(rank)
    for name, body in [
        ("backend", check_backend),
        ("all_reduce_ops", check_all_reduce_ops),
        ("broadcast_all_gather_reduce_scatter", check_broadcast_all_gather_reduce_scatter),
        ("objects_and_barrier", check_objects_and_barrier),
        ("async_work", check_async_work),
        ("ddp_matches_one_process", check_ddp_matches_one_process),
        ("unsupported_calls_name_themselves", check_unsupported_calls_name_themselves),
        ("groups", check_groups),
        # Last: a mismatch fails the engine (every later collective would fail too).
        ("mismatch_raises_naming_the_call", check_mismatch_raises_naming_the_call),
    ]:
        checks.run(name, body, rank, size)
    checks.write()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
