"""DistributedOptimizer and the broadcast helpers on the ranks of a torchrun-style job: each rank
trains on its quarter of every global batch and must end where one process training on the whole
batch ends; see test_torch_optimizer.py."""

import warnings

import torch

import ringd.torch as hvd
from common import Checks

STEPS = 5
BATCH = 32


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def batches():
    generator = torch.Generator().manual_seed(123)
    return [(torch.randn(BATCH, 8, generator=generator), torch.randn(BATCH, 4, generator=generator))
            for _ in range(STEPS)]


def loss_of(model, inputs, targets):
    return torch.nn.functional.mse_loss(model(inputs), targets)


def reference(make_optimizer, clip=None):
    """One process, the whole batch."""
    model = make_model(0)
    optimizer = make_optimizer(model.parameters())
    for inputs, targets in batches():
        optimizer.zero_grad()
        loss_of(model, inputs, targets).backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
    return model


def relative_difference(model, expected):
    worst = 0.0
    for got, want in zip(model.parameters(), expected.parameters()):
        worst = max(worst, float((got - want).norm() / want.norm()))
    return worst


def replicas_identical(model, name):
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = hvd.allgather(flat.unsqueeze(0), name=name)
    return all(torch.equal(row, everyone[0]) for row in everyone)


def distributed_training(rank, size, make_optimizer, passes=1, clip=None, **options):
    model = make_model(rank)  # replicas differ until broadcast_parameters
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(make_optimizer(model.parameters()),
                                         named_parameters=model.named_parameters(),
                                         backward_passes_per_step=passes, **options)
    share = BATCH // size
    for inputs, targets in batches():
        mine = slice(rank * share, (rank + 1) * share)
        optimizer.zero_grad()
        for part_inputs, part_targets in zip(inputs[mine].chunk(passes), targets[mine].chunk(passes)):
            (loss_of(model, part_inputs, part_targets) / passes).backward()
        if clip is None:
            optimizer.step()
        else:
            optimizer.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            with optimizer.skip_synchronize():
                optimizer.step()
    return model, optimizer


def sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def adam(params):
    return torch.optim.Adam(params, lr=0.01)


def check_close_to_one_process(rank, size, make_optimizer, clip=None, tolerance=1e-5, **options):
    model, optimizer = distributed_training(rank, size, make_optimizer, clip=clip, **options)
    assert isinstance(optimizer, type(make_optimizer(make_model(0).parameters())))
    difference = relative_difference(model, reference(make_optimizer, clip))
    assert difference <= tolerance, f"relative difference {difference}"
    assert replicas_identical(model, "identical." + str(sorted(options.items())) + str(clip))


def check_broadcast_parameters(rank, size):
    model = make_model(rank)
    buffer_model = torch.nn.BatchNorm1d(3)
    buffer_model.running_mean.fill_(rank)
    assert not replicas_identical(model, "before.broadcast") or size == 1
    hvd.broadcast_parameters(model.state_dict(), root_rank=1)
    hvd.broadcast_parameters(buffer_model.state_dict(), root_rank=1, prefix="bn")
    assert replicas_identical(model, "after.broadcast")
    assert torch.equal(model[0].weight, make_model(1)[0].weight)
    assert torch.equal(buffer_model.running_mean, torch.ones(3))
    other = make_model(rank)
    hvd.broadcast_parameters(list(other.named_parameters()), root_rank=0, prefix="pairs")
    assert torch.equal(other[2].bias, make_model(0)[2].bias)


def check_broadcast_optimizer_state(rank, size):
    model = make_model(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01 * (rank + 1))
    if rank == 0:  # only the root has stepped: the others have no state yet
        for inputs, targets in batches()[:2]:
            optimizer.zero_grad()
            loss_of(model, inputs, targets).backward()
            optimizer.step()
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    assert optimizer.param_groups[0]["lr"] == 0.01
    state = optimizer.state_dict()["state"]
    assert len(state) == 4 and float(state[0]["step"]) == 2.0
    flat = torch.cat([state[index][key].reshape(-1) for index in sorted(state)
                      for key in ("exp_avg", "exp_avg_sq")])
    everyone = hvd.allgather(flat.unsqueeze(0), name="optimizer.state")
    assert all(torch.equal(row, everyone[0]) for row in everyone)
    assert float(flat.abs().sum()) > 0


def check_zero_grad_with_pending_allreduces_warns(rank, size):
    model = make_model(0)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(prefix="zg"))
    inputs, targets = batches()[0]
    loss_of(model, inputs, targets).backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimizer.zero_grad()
    assert any("zero_grad" in str(w.message) for w in caught), [str(w.message) for w in caught]
    loss_of(model, inputs, targets).backward()
    optimizer.step()  # usable afterwards
    optimizer.remove_hooks()


def check_two_backward_passes_without_accumulation_raise(rank, size):
    model = make_model(0)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(prefix="twice"))
    inputs, targets = batches()[0]
    loss_of(model, inputs, targets).backward()
    try:
        loss_of(model, inputs, targets).backward()
    except RuntimeError as error:
        assert "backward_passes_per_step" in str(error), str(error)
    else:
        raise AssertionError("a second backward pass before step() was accepted")
    optimizer.synchronize()
    optimizer.remove_hooks()


def check_unused_parameters_get_zero_gradients(rank, size):
    model = make_model(0)
    unused = torch.nn.Linear(2, 2)
    params = list(model.parameters()) + list(unused.parameters())
    names = [(f"used.{n}", p) for n, p in model.named_parameters()] + \
        [(f"unused.{n}", p) for n, p in unused.named_parameters()]
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1), named_parameters=names)
    inputs, targets = batches()[0]
    loss_of(model, inputs, targets).backward()
    optimizer.step()
    assert torch.equal(unused.weight.grad, torch.zeros(2, 2))
    optimizer.remove_hooks()


class _ScaleBy2:
    """A Python-side compressor (compress/decompress, no engine wire format), as a Horovod user
    might write one: it doubles what travels and halves it back."""

    @staticmethod
    def compress(tensor):
        return tensor * 2, None

    @staticmethod
    def decompress(tensor, context):
        return tensor / 2


def check_every_gradient_layout_and_path(rank, size):
    """Contiguous gradients go to the engine directly, a transposed parameter's (non-contiguous)
    gradient and a Python compressor's through the staged path: every one averaged in place, its
    autograd version counter moved on by the allreduce."""
    for tag, compression in (("direct", hvd.Compression.none), ("python", _ScaleBy2)):
        plain = torch.nn.Parameter(torch.zeros(5, 3))
        transposed = torch.nn.Parameter(torch.zeros(3, 4).t())
        assert not transposed.is_contiguous()
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD([plain, transposed], lr=1.0),
            named_parameters=[(f"layout.{tag}.plain", plain),
                              (f"layout.{tag}.transposed", transposed)],
            compression=compression)
        ((rank + 1) * (plain.sum() + 2 * transposed.sum())).backward()
        versions = {name: p.grad._version for name, p in (("plain", plain),
                                                          ("transposed", transposed))}
        optimizer.synchronize()
        mean = sum(range(1, size + 1)) / size
        for name, p, factor in (("plain", plain, 1.0), ("transposed", transposed, 2.0)):
            assert torch.equal(p.grad, torch.full_like(p.grad, mean * factor)), (tag, name, p.grad)
            assert p.grad._version > versions[name], (tag, name, "version not moved on")
        assert not transposed.grad.is_contiguous() or tag == "python", "layout changed"
        with optimizer.skip_synchronize():
            optimizer.step()
        assert torch.equal(plain.detach(), torch.full((5, 3), -mean)), (tag, plain)
        optimizer.remove_hooks()


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    checks = Checks(rank)
    checks.run("sgd", check_close_to_one_process, rank, size, sgd)
    checks.run("adam", check_close_to_one_process, rank, size, adam)
    checks.run("backward_passes_per_step_2", check_close_to_one_process, rank, size, sgd,
               passes=2)
    checks.run("gradient_predivide_factor", check_close_to_one_process, rank, size, adam,
               gradient_predivide_factor=4.0)
    checks.run("skip_synchronize_with_clipping", check_close_to_one_process, rank, size, sgd,
               clip=0.5)
    checks.run("fp16_compression", check_close_to_one_process, rank, size, sgd, tolerance=1e-2,
               compression=hvd.Compression.fp16)
    checks.run("broadcast_parameters", check_broadcast_parameters, rank, size)
    checks.run("broadcast_optimizer_state", check_broadcast_optimizer_state, rank, size)
    checks.run("zero_grad_warns", check_zero_grad_with_pending_allreduces_warns, rank, size)
    checks.run("second_backward_raises", check_two_backward_passes_without_accumulation_raise,
               rank, size)
    checks.run("unused_parameters", check_unused_parameters_get_zero_gradients, rank, size)
    checks.run("every_gradient_layout_and_path", check_every_gradient_layout_and_path, rank, size)
    checks.write()
    hvd.shutdown()


if __name__ == "__main__":
    main()
