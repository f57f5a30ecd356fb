"""ringd.torch on CUDA tensors (test_torch_cuda.py): every rank uses GPU LOCAL_RANK % the GPUs
there are (so 2 ranks share one GPU on a one-GPU machine). Results must come back on the tensor's
own device, equal to the same collective on CPU tensors, and training a CUDA model with
DistributedOptimizer must end where the same training on the CPU ends."""

import os

import torch

import ringd.torch as hvd
from common import Checks

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8)


def values(rank, count, dtype):
    """Small integers, exact in every dtype and in every sum of a few ranks."""
    return ((torch.arange(count, dtype=torch.int64) * 7 + rank * 3) % 11).to(dtype)


def check_device(result, device, what):
    assert result.device == device, f"{what}: result on {result.device}, want {device}"


def allreduce_every_dtype(rank, size, device):
    for dtype in DTYPES:
        for count in (1, 1000, 65537):
            expected = sum(values(r, count, dtype).to(torch.int64) for r in range(size))
            expected = expected.to(dtype)
            name = f"cuda.{dtype}.{count}"
            got = hvd.allreduce(values(rank, count, dtype).to(device), op=hvd.Sum, name=name)
            check_device(got, device, name)
            assert torch.equal(got.cpu(), expected), f"{name}: allreduce differs"
            tensor = values(rank, count, dtype).to(device)
            pointer = tensor.data_ptr()
            handle = hvd.allreduce_async_(tensor, op=hvd.Sum, name=name + ".async_")
            same = hvd.synchronize(handle)
            assert same is tensor and tensor.data_ptr() == pointer, f"{name}: not in place"
            assert torch.equal(tensor.cpu(), expected), f"{name}: allreduce_async_ differs"
    averaged = hvd.allreduce(torch.full((4,), float(rank), device=device), name="cuda.average")
    check_device(averaged, device, "average")
    assert torch.allclose(averaged.cpu(), torch.full((4,), (size - 1) / 2)), "average differs"


def broadcast_allgather(rank, size, device):
    root = size - 1
    tensor = values(rank, 513, torch.float32).to(device)
    hvd.broadcast_(tensor, root_rank=root, name="cuda.broadcast_")
    assert torch.equal(tensor.cpu(), values(root, 513, torch.float32)), "broadcast_ differs"
    copy = hvd.broadcast(values(rank, 7, torch.int64).to(device), root_rank=0, name="cuda.bcast")
    check_device(copy, device, "broadcast")
    assert torch.equal(copy.cpu(), values(0, 7, torch.int64)), "broadcast differs"
    rows = hvd.allgather(torch.full((rank + 1, 3), float(rank), device=device),
                         name="cuda.allgather")
    check_device(rows, device, "allgather")
    want = torch.cat([torch.full((r + 1, 3), float(r)) for r in range(size)])
    assert torch.equal(rows.cpu(), want), "allgather differs"


def make_model(seed, device):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8))
    return model.to(device)


def train(rank, size, device, compression, tag):
    """5 steps of SGD with momentum, each rank on its share of a global batch of 64."""
    model = make_model(rank, device)  # replicas differ until broadcast_parameters
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        named_parameters=[(f"{tag}.{n}", p) for n, p in model.named_parameters()],
        compression=compression)
    generator = torch.Generator().manual_seed(7)
    share = 64 // size
    for _ in range(5):
        inputs = torch.randn(64, 32, generator=generator)[rank * share:(rank + 1) * share]
        targets = torch.randn(64, 8, generator=generator)[rank * share:(rank + 1) * share]
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs.to(device)), targets.to(device))
        loss.backward()
        optimizer.step()
    return [p.detach().cpu() for p in model.parameters()]


def optimizer_matches_cpu(rank, size, device, compression, name, tolerance):
    """The same training on the GPU and on the CPU ends within `tolerance` (relative L2 of the
    parameters), and the GPU replicas are identical."""
    on_gpu = train(rank, size, device, compression, f"gpu.{name}")
    on_cpu = train(rank, size, torch.device("cpu"), compression, f"cpu.{name}")
    worst = max(float((g - c).norm() / c.norm()) for g, c in zip(on_gpu, on_cpu))
    print(f"rank {rank}: {name}: CUDA against CPU parameters: {worst:.2e} (relative L2)",
          flush=True)
    assert worst <= tolerance, f"{name}: CUDA parameters differ from CPU ones by {worst:.2e}"
    flat = torch.cat([p.reshape(-1) for p in on_gpu]).to(device)
    everyone = hvd.allgather(flat.unsqueeze(0), name=f"replicas.{name}")
    assert all(torch.equal(row, everyone[0]) for row in everyone), f"{name}: replicas differ"


def dgc_trains_on_cuda(rank, size, device):
    """DGC keeps its velocities in the engine (host memory): a CUDA model trains, the replicas
    stay identical, and the parameters end near the CPU run's (the GPU's rounding may change
    which elements top-k picks, so not bitwise)."""
    hvd.set_epoch(10)  # past the warm-up: the sparsity asked for
    compression = hvd.Compression.dgc(sparsity=0.99, min_sparse_elements=256)
    optimizer_matches_cpu(rank, size, device, compression, "dgc", 1e-2)


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) %
                          torch.cuda.device_count())
    torch.cuda.set_device(device)
    checks = Checks(rank)
    checks.run("allreduce_every_dtype", allreduce_every_dtype, rank, size, device)
    checks.run("broadcast_allgather", broadcast_allgather, rank, size, device)
    checks.run("optimizer_none", optimizer_matches_cpu, rank, size, device,
               hvd.Compression.none, "none", 1e-5)
    checks.run("optimizer_fp16", optimizer_matches_cpu, rank, size, device,
               hvd.Compression.fp16, "fp16", 1e-2)
    checks.run("optimizer_dgc", dgc_trains_on_cuda, rank, size, device)
    checks.write()
    hvd.shutdown()


if __name__ == "__main__":
    main()
