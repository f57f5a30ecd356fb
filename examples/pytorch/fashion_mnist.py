#!/usr/bin/env python3
"""A small CNN on Fashion-MNIST, data-parallel: each rank trains on its share of every epoch and
the gradients are averaged by ringd.torch's DistributedOptimizer (or, with --framework, Horovod's
or PyTorch DDP's, so the comparison is the same script).

    mpirun -np 4 python examples/pytorch/fashion_mnist.py
    mpirun -np 4 python examples/pytorch/fashion_mnist.py --framework horovod
    mpirun -np 4 python examples/pytorch/fashion_mnist.py --optimizer sgd --lr-schedule cosine \
        --compression dgc        # deep gradient compression (ringd): 0.1% of each gradient sent

Reads the IDX files of Debian's dataset-fashion-mnist package (apt-get install
dataset-fashion-mnist; --data-dir for others): nothing is downloaded. Rank 0 prints one line per
epoch (loss, test accuracy, time, samples/s) and the final test accuracy; --json writes them.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "common")]
from example_common import FASHION_MNIST_DIR, fashion_mnist  # noqa: E402
from frameworks import FRAMEWORKS, Distributed  # noqa: E402


def load(data_dir, split):
    x, y = fashion_mnist(data_dir, split)
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


class Net(nn.Module):
    """Two 5x5 convolutions (32, 64 channels) with max-pooling, then 1024 -> 128 -> 10."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", choices=FRAMEWORKS, default="ringd")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default="adam",
                        help="Adam (default) or SGD with --momentum")
    parser.add_argument("--lr", type=float, default=None, help="for one rank (default: Adam "
                        "1e-3, SGD 0.05); scaled by the square root of the number of ranks")
    parser.add_argument("--momentum", type=float, default=0.9, help="SGD's (default 0.9)")
    parser.add_argument("--lr-schedule", choices=("constant", "cosine"), default="constant",
                        help="constant (default) or cosine: decays to 0 over the epochs, per step")
    parser.add_argument("--data-dir", default=FASHION_MNIST_DIR)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads per rank (0: cores / local ranks, at least 1)")
    parser.add_argument("--fp16-allreduce", action="store_true",
                        help="gradients travel as float16 (not with --framework ddp)")
    parser.add_argument("--compression", choices=("none", "fp16", "dgc"), default="none",
                        help="none, fp16 (= --fp16-allreduce) or dgc: deep gradient compression "
                        "(ringd only; with SGD the momentum moves into the compressor)")
    parser.add_argument("--dgc-sparsity", type=float, default=0.999,
                        help="dgc: share of each gradient not sent (default 0.999)")
    parser.add_argument("--dgc-warmup-epochs", type=int, default=1,
                        help="dgc: epochs of the sparsity ramp 75%%, 93.75%%, ... (default 1)")
    parser.add_argument("--limit-train", type=int, default=0,
                        help="train on this many images per epoch (all ranks together; 0: all "
                        "60000): a quick smoke run")
    parser.add_argument("--json", help="write the per-epoch results here (rank 0)")
    args = parser.parse_args()
    if args.lr is None:
        args.lr = 1e-3 if args.optimizer == "adam" else 0.05
    if args.epochs < 1 or args.batch_size < 1 or not args.lr > 0 or args.limit_train < 0 or \
            not 0 <= args.momentum < 1 or args.dgc_warmup_epochs < 0:
        parser.error("--epochs and --batch-size must be at least 1, --lr positive, --momentum in "
                     "[0, 1) and --limit-train and --dgc-warmup-epochs at least 0")
    if args.fp16_allreduce:
        args.compression = "fp16"

    dist = Distributed(args.framework)
    local_size = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE",
                                    os.environ.get("LOCAL_WORLD_SIZE", "1")))
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // local_size))
    torch.manual_seed(args.seed)

    train_x, train_y = load(args.data_dir, "train")
    test_x, test_y = load(args.data_dir, "test")
    model = Net()
    lr = args.lr * dist.size ** 0.5
    if args.optimizer == "adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=args.momentum)
    model, optimizer = dist.wrap(
        model, optimizer, None if args.compression == "none" else args.compression,
        {"sparsity": args.dgc_sparsity, "warmup_epochs": args.dgc_warmup_epochs})
    images = min(args.limit_train or len(train_x), len(train_x))
    steps_per_epoch = images // dist.size // args.batch_size
    scheduler = None
    if args.lr_schedule == "cosine":  # per step, to 0 at the last step's end
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=max(1, args.epochs * steps_per_epoch))

    # This rank's share of the test set; the counts are summed across the ranks.
    test_share = slice(dist.rank, None, dist.size)
    results = []
    started = time.time()
    for epoch in range(1, args.epochs + 1):
        dist.set_epoch(epoch - 1)
        model.train()
        order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(
            args.seed * 1000 + epoch))
        if args.limit_train:
            order = order[:args.limit_train]
        mine = order[dist.rank::dist.size]
        steps = steps_per_epoch  # the same on every rank
        epoch_start = time.time()
        loss_sum = 0.0
        for step in range(steps):
            batch = mine[step * args.batch_size:(step + 1) * args.batch_size]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(train_x[batch]), train_y[batch])
            loss.backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            loss_sum += loss.item()
        train_s = time.time() - epoch_start

        model.eval()
        with torch.no_grad():
            logits = model(test_x[test_share])
            correct = (logits.argmax(1) == test_y[test_share]).sum().item()
        totals = dist.sum(torch.tensor([correct, len(test_y[test_share]), loss_sum, steps],
                                       dtype=torch.float64))
        accuracy = totals[0].item() / totals[1].item()
        mean_loss = totals[2].item() / totals[3].item()
        samples_s = steps * args.batch_size * dist.size / train_s
        results.append({"epoch": epoch, "loss": mean_loss, "test_accuracy": accuracy,
                        "train_s": train_s, "samples_per_s": samples_s})
        if dist.rank == 0:
            print(f"epoch {epoch}/{args.epochs}  loss {mean_loss:.4f}  test accuracy {accuracy:.4f}"
                  f"  {train_s:.1f} s  {samples_s:.0f} samples/s  ({args.framework}, "
                  f"{dist.size} ranks)", flush=True)
    if dist.rank == 0:
        print(f"final test accuracy {results[-1]['test_accuracy']:.4f} after {args.epochs} epochs "
              f"in {time.time() - started:.1f} s", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"framework": args.framework, "ranks": dist.size,
                           "optimizer": args.optimizer, "lr_schedule": args.lr_schedule,
                           "compression": args.compression, "dgc_sparsity": args.dgc_sparsity,
                           "seed": args.seed, "epochs": results}, f, indent=1)
    dist.shutdown()


if __name__ == "__main__":
    main()
