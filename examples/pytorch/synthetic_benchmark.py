#!/usr/bin/env python3
"""Synthetic data-parallel benchmark, after Horovod's pytorch_synthetic_benchmark: a model with a
real network's parameter tensors (the gradient profiles in data/gradient_profiles/: ResNet-50,
VGG-16, BERT-base, Inception V3) and modeled compute, so the figure is the communication's.

    mpirun -np 4 python examples/pytorch/synthetic_benchmark.py --profile resnet50
    mpirun -np 4 python examples/pytorch/synthetic_benchmark.py --framework horovod
    mpirun -np 4 python examples/pytorch/synthetic_benchmark.py --framework ddp

The model: one parameter tensor per line of the profile (flat, the profile's element count). The
forward pass runs through them in order and the backward pass in reverse, as a network's would:
each tensor's backward waits its share of --compute-ms (two thirds of it; the forward the other
third, shares proportional to the tensor's size: a GPU's time, which leaves the CPU to the
communication) and produces a dense gradient, which autograd hands to the framework at once.
Prints images/s per rank (--batch-size images per step), mean and 95% interval over --num-iters.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frameworks import FRAMEWORKS, Distributed  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read_profile(name_or_path):
    """[(tensor name, element count)] from a profile name or a .tsv path."""
    path = name_or_path
    if not os.path.exists(path):
        path = os.path.join(REPO, "data", "gradient_profiles", name_or_path + ".tsv")
    if not os.path.exists(path):
        raise SystemExit(f"--profile {name_or_path}: no such profile (resnet50, vgg16, bert_base, "
                         f"inception_v3, or a .tsv path)")
    tensors = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 2 or not fields[1].isdigit() or int(fields[1]) < 1:
                raise SystemExit(f"{path}:{number}: expected 'name<TAB>element count': {line!r}")
            tensors.append((fields[0], int(fields[1])))
    return tensors


class ModeledLayer(torch.autograd.Function):
    """y = x + w[0] * 0; forward waits forward_s, backward waits backward_s and returns a dense
    gradient for all of w."""

    @staticmethod
    def forward(ctx, x, weight, forward_s, backward_s):
        if forward_s > 0:
            time.sleep(forward_s)
        ctx.backward_s = backward_s
        ctx.save_for_backward(weight)
        return x + weight[0] * 0

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.backward_s > 0:
            time.sleep(ctx.backward_s)
        (weight,) = ctx.saved_tensors
        return grad_output, torch.full_like(weight, 1e-3) * grad_output, None, None


class ProfileModel(nn.Module):
    def __init__(self, tensors, compute_s):
        super().__init__()
        total = sum(count for _, count in tensors)
        self.names = [name.replace(".", "_") for name, _ in tensors]
        self.weights = nn.ParameterList(
            nn.Parameter(torch.zeros(count)) for _, count in tensors)
        self.shares = [compute_s * count / total for _, count in tensors]

    def forward(self, x):
        for weight, share in zip(self.weights, self.shares):
            x = ModeledLayer.apply(x, weight, share / 3, share * 2 / 3)
        return x


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", choices=FRAMEWORKS, default="ringd")
    parser.add_argument("--profile", default="resnet50")
    parser.add_argument("--compute-ms", type=float, default=100.0,
                        help="modeled forward + backward time per step")
    parser.add_argument("--batch-size", type=int, default=32, help="images per step per rank")
    parser.add_argument("--num-warmup-batches", type=int, default=3)
    parser.add_argument("--num-batches-per-iter", type=int, default=5)
    parser.add_argument("--num-iters", type=int, default=5)
    parser.add_argument("--fp16-allreduce", action="store_true")
    parser.add_argument("--json", help="write the result here (rank 0)")
    args = parser.parse_args()
    if min(args.batch_size, args.num_batches_per_iter, args.num_iters) < 1 or \
            args.num_warmup_batches < 0 or not args.compute_ms >= 0:
        parser.error("sizes and counts must be at least 1 (warm-up 0), --compute-ms >= 0")

    dist = Distributed(args.framework)
    torch.set_num_threads(1)
    tensors = read_profile(args.profile)
    model = ProfileModel(tensors, args.compute_ms / 1000.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = dist.wrap(model, optimizer, "fp16" if args.fp16_allreduce else None)
    parameters = sum(count for _, count in tensors)
    if dist.rank == 0:
        print(f"model: {args.profile} ({len(tensors)} tensors, {parameters / 1e6:.1f} M "
              f"parameters, {parameters * 4 / 2**20:.1f} MiB of gradients), modeled compute "
              f"{args.compute_ms:g} ms/step, batch {args.batch_size}/rank, {dist.size} ranks, "
              f"{args.framework}", flush=True)

    x = torch.zeros(())

    def step():
        optimizer.zero_grad()
        model(x).backward()
        optimizer.step()

    for _ in range(args.num_warmup_batches):
        step()
    rates = []
    for i in range(args.num_iters):
        started = time.time()
        for _ in range(args.num_batches_per_iter):
            step()
        elapsed = time.time() - started
        rates.append(args.batch_size * args.num_batches_per_iter / elapsed)
        if dist.rank == 0:
            print(f"iter #{i}: {rates[-1]:.1f} img/s per rank "
                  f"({elapsed / args.num_batches_per_iter * 1000:.1f} ms/step)", flush=True)
    mean = float(np.mean(rates))
    interval = float(1.96 * np.std(rates))
    if dist.rank == 0:
        print(f"img/s per rank: {mean:.1f} +- {interval:.1f}")
        print(f"total img/s on {dist.size} ranks: {mean * dist.size:.1f} +- "
              f"{interval * dist.size:.1f}", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"framework": args.framework, "profile": args.profile,
                           "ranks": dist.size, "compute_ms": args.compute_ms,
                           "batch_size": args.batch_size, "img_per_s_per_rank": mean,
                           "interval": interval, "rates": rates}, f, indent=1)
    dist.shutdown()


if __name__ == "__main__":
    main()
