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
import os
import sys
import time

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "common")]
from example_common import (  # noqa: E402
    add_synthetic_flags,
    check_synthetic_flags,
    describe_model,
    read_profile,
    run_synthetic,
)
from frameworks import FRAMEWORKS, Distributed  # noqa: E402


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
    add_synthetic_flags(parser)
    args = parser.parse_args()
    check_synthetic_flags(parser, args)

    dist = Distributed(args.framework)
    torch.set_num_threads(1)
    tensors = read_profile(args.profile)
    model = ProfileModel(tensors, args.compute_ms / 1000.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = dist.wrap(model, optimizer, "fp16" if args.fp16_allreduce else None)
    if dist.rank == 0:
        describe_model(args, tensors, dist.size)

    x = torch.zeros(())

    def step():
        optimizer.zero_grad()
        model(x).backward()
        optimizer.step()

    run_synthetic(step, args, dist.rank, dist.size)
    dist.shutdown()


if __name__ == "__main__":
    main()
