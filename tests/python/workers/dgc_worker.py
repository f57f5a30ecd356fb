"""Deep gradient compression through ringd.torch on the ranks of a torchrun-style job; see
test_torch_dgc.py. Every rank computes what every rank must get with a NumPy reference of the
paper's algorithm (momentum correction, local accumulation, momentum factor masking, exact top-k),
from gradients any rank can compute for any other."""

import numpy as np
import torch

import ringd.torch as hvd
from common import Checks
from ringd.torch.compression import DGCCompressor

SPARSITY = 0.99
MOMENTUM = 0.9
WARMUP_EPOCHS = 2  # 75%, 93.75%; then 99%


def settings(**overrides):
    """The job's settings (every check that configures DGC uses these)."""
    values = {"sparsity": SPARSITY, "momentum": MOMENTUM, "warmup_epochs": WARMUP_EPOCHS}
    values.update(overrides)
    return hvd.Compression.dgc(**values)


class Reference:
    """One rank's compressor for one tensor, in float32 as the engine computes it."""

    def __init__(self, count, momentum=MOMENTUM):
        self.u = np.zeros(count, np.float32)
        self.v = np.zeros(count, np.float32)
        self.m = np.float32(momentum)

    def accumulate(self, g):
        self.u = self.m * self.u + g
        self.v = self.v + self.u

    def sparse(self, k):
        """The k entries of largest |v| (index order), then masked out of u and v."""
        chosen = np.sort(np.argpartition(-np.abs(self.v), k - 1)[:k])
        values = self.v[chosen].copy()
        self.v[chosen] = 0
        self.u[chosen] = 0
        return chosen, values

    def dense(self):
        out = self.v.copy()
        self.v[:] = 0
        return out


def kept(count, sparsity):
    return max(1, int(np.ceil(count * (1 - sparsity) - 1e-6)))


def average_of(references, gradients, sparsity, sparse):
    """Every rank's compressed gradient added in rank order, then / size."""
    size = len(references)
    total = np.zeros(len(gradients[0]), np.float32)
    for reference, g in zip(references, gradients):
        reference.accumulate(g)
        if sparse:
            chosen, values = reference.sparse(kept(len(g), sparsity))
            total[chosen] += values
        else:
            total += reference.dense()
    return total / np.float32(size)


def gradient(rank, step, count, salt):
    return np.random.default_rng(1000 * salt + 10 * step + rank).standard_normal(
        count).astype(np.float32)


def check_bad_settings_raise_at_once(rank, size):
    for bad in ({"sparsity": 1.0}, {"sparsity": -0.1}, {"momentum": 1.0}, {"warmup_epochs": -1},
                {"warmup_epochs": 1.5}, {"clip_norm": -1.0}, {"sample_fraction": 0.0},
                {"sparsity": float("nan")}, {"min_sparse_elements": -1}):
        try:
            hvd.Compression.dgc(**bad)
        except ValueError as error:
            assert "Compression.dgc(" + next(iter(bad)) in str(error), str(error)
        else:
            raise AssertionError(f"Compression.dgc({bad}) was accepted")
    assert DGCCompressor(0.999, None, 4).warmup() == [0.75, 0.9375, 0.984375, 0.99609375]
    assert DGCCompressor(0.9, None, 3).warmup() == [0.75, 0.9, 0.9]


def check_ranks_that_disagree_raise_mismatch(rank, size):
    mine = settings(sparsity=0.9 if rank == 2 else SPARSITY)
    try:
        hvd.allreduce_(torch.zeros(8), name="disagree", compression=mine)
    except hvd.MismatchError as error:
        assert "sparsity" in str(error) and "ranks [2]" in str(error), str(error)
    else:
        raise AssertionError("different DGC settings across ranks were accepted")


def check_optimizer_refusals(rank, size):
    model = torch.nn.Linear(4, 2)
    for optimizer, compression, words in [
        (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True), settings(),
         "nesterov"),
        (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), settings(),
         "momentum given twice"),
        (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, dampening=0.1),
         settings(momentum=None), "dampening"),
        (torch.optim.SGD([{"params": [model.weight], "momentum": 0.9},
                          {"params": [model.bias], "momentum": 0.5}], lr=0.1),
         settings(momentum=None), "different momenta"),
    ]:
        try:
            hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     compression=compression)
        except ValueError as error:
            assert words in str(error), str(error)
        else:
            raise AssertionError(f"accepted: {words}")
        assert optimizer.param_groups[0]["momentum"] != 0.0, "a refusal changed the optimizer"


def check_allreduce_matches_the_reference(rank, size):
    hvd.set_epoch(WARMUP_EPOCHS)  # past the warm-up: 99%
    big, small = 20000, 100  # small: under min_sparse_elements, dense
    references = {count: [Reference(count) for _ in range(size)] for count in (big, small)}
    for step in range(3):
        for count, salt in ((big, 1), (small, 2)):
            tensor = torch.from_numpy(gradient(rank, step, count, salt))
            hvd.allreduce_(tensor, name=f"reference.{count}", compression=settings())
            everyone = [gradient(r, step, count, salt) for r in range(size)]
            expected = average_of(references[count], everyone, SPARSITY, sparse=count == big)
            got = tensor.numpy()
            if count == big:
                assert np.count_nonzero(got) <= size * kept(big, SPARSITY)
                np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7,
                                           err_msg=f"step {step}")
            else:  # the dense ring adds in its own order
                np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6,
                                           err_msg=f"step {step}")
            flat = hvd.allgather(tensor.unsqueeze(0), name=f"reference.{count}.{step}.check")
            assert all(torch.equal(row, flat[0]) for row in flat), "replicas differ"


def check_warmup_follows_set_epoch(rank, size):
    count = 20000
    g = torch.from_numpy(gradient(rank, 0, count, 3))
    hvd.set_epoch(0)  # 75%: 4 ranks x 5000 pairs cost as much as the dense ring: dense
    first = g.clone()
    hvd.allreduce_(first, name="warm", compression=settings())
    dense = sum(gradient(r, 0, count, 3) for r in range(size)) / size
    np.testing.assert_allclose(first.numpy(), dense, rtol=1e-5, atol=1e-6)
    hvd.set_epoch(1)  # 93.75%: 1250 pairs per rank
    second = g.clone()
    hvd.allreduce_(second, name="warm", compression=settings())
    nonzero = int(torch.count_nonzero(second))
    assert kept(count, 0.9375) <= nonzero <= size * kept(count, 0.9375), nonzero
    hvd.set_epoch(WARMUP_EPOCHS)
    try:
        hvd.set_epoch("1")
    except hvd.InvalidArgumentError:
        pass
    else:
        raise AssertionError("set_epoch('1') was accepted")
    try:
        hvd.set_epoch(-1)
    except hvd.InvalidArgumentError as error:
        assert "epochs count from 0" in str(error), str(error)
    else:
        raise AssertionError("set_epoch(-1) was accepted")


def check_optimizer_takes_the_momentum_and_applies_the_reference(rank, size):
    """SGD(momentum=0.9) wrapped with Compression.dgc(momentum=None): the optimizer's momentum
    becomes 0 and the compressor's 0.9; each step's reduced gradient is the reference's average
    of every rank's compressed velocity, and the replicas stay identical."""
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 128)  # weight: 8192 elements (sparse), bias: 128 (dense)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=MOMENTUM),
        named_parameters=model.named_parameters(prefix="dgc_model"),
        compression=settings(momentum=None))
    assert all(group["momentum"] == 0.0 for group in optimizer.param_groups)
    references = {name: [Reference(p.numel()) for _ in range(size)]
                  for name, p in model.named_parameters()}
    generator = torch.Generator().manual_seed(7)
    data = [(torch.randn(size, 16, 64, generator=generator),
             torch.randn(size, 16, 128, generator=generator)) for _ in range(4)]
    for inputs, targets in data:
        # Every rank's local gradients, gathered (to compute the reference) before the step.
        local = torch.nn.Linear(64, 128)
        local.load_state_dict(model.state_dict())
        torch.nn.functional.mse_loss(local(inputs[rank]), targets[rank]).backward()
        gathered = {name: hvd.allgather(p.grad.reshape(1, -1), name=f"dgc_model.local.{name}")
                    for name, p in local.named_parameters()}
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(inputs[rank]), targets[rank]).backward()
        optimizer.synchronize()
        for name, p in model.named_parameters():
            everyone = [row.numpy() for row in gathered[name]]
            sparse = p.numel() >= 4096
            expected = average_of(references[name], everyone, SPARSITY, sparse)
            np.testing.assert_allclose(p.grad.reshape(-1).numpy(), expected, rtol=1e-5,
                                       atol=1e-7, err_msg=name)
        before = [p.detach().clone() for p in model.parameters()]
        with optimizer.skip_synchronize():
            optimizer.step()
        for p, old in zip(model.parameters(), before):  # plain SGD on the reduced gradient
            assert torch.equal(p.detach(), old.add(p.grad, alpha=-0.05))
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = hvd.allgather(flat.unsqueeze(0), name="dgc_model.final")
    assert all(torch.equal(row, everyone[0]) for row in everyone), "replicas differ"
    optimizer.remove_hooks()


def check_other_settings_later_are_refused(rank, size):
    try:
        hvd.allreduce_(torch.zeros(8), name="other", compression=settings(sparsity=0.9))
    except hvd.InvalidArgumentError as error:
        assert "one set of DGC settings" in str(error), str(error)
    else:
        raise AssertionError("new DGC settings were accepted after the first")
    hvd.allreduce_(torch.zeros(8), name="same", compression=settings())  # the same: fine


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    checks = Checks(rank)
    # Order matters: the first two leave the job without DGC settings, the rest share one set.
    checks.run("bad_settings", check_bad_settings_raise_at_once, rank, size)
    checks.run("disagreeing_ranks", check_ranks_that_disagree_raise_mismatch, rank, size)
    checks.run("optimizer_refusals", check_optimizer_refusals, rank, size)
    checks.run("allreduce_reference", check_allreduce_matches_the_reference, rank, size)
    checks.run("warmup", check_warmup_follows_set_epoch, rank, size)
    checks.run("optimizer_reference",
               check_optimizer_takes_the_momentum_and_applies_the_reference, rank, size)
    checks.run("other_settings_refused", check_other_settings_later_are_refused, rank, size)
    checks.write()
    hvd.shutdown()


if __name__ == "__main__":
    main()
