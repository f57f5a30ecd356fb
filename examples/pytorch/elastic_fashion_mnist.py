#!/usr/bin/env python3
"""fashion_mnist.py's CNN trained elastically with ringd.torch.elastic (Horovod's elastic API):
processes may be lost and added while the job trains (docs/elastic.md).

    export RINGD_ELASTIC_RENDEZVOUS=node-0:29400 RINGD_ELASTIC_MAX_RANKS=4 \\
           RINGD_ELASTIC_MIN_RANKS=2 RINGD_JOB_ID=fmnist
    python examples/pytorch/elastic_fashion_mnist.py      # on every node, any time

No mpirun: every process runs the same line (the one on node-0 serves the rendezvous). A lost
process rolls the others back to their last commit (every --commit-every batches) and they go on
without it; a process started later joins at the next commit. Each epoch's images are spread over
the ranks there are (hvd.elastic.ElasticSampler), none skipped. Rank 0 prints a line per epoch
(loss, test accuracy, ranks) and the final accuracy; --json writes them.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fashion_mnist import FASHION_MNIST_DIR, Net, load  # noqa: E402

import ringd.torch as hvd  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's, for one rank; scaled by "
                        "the square root of RINGD_ELASTIC_MAX_RANKS")
    parser.add_argument("--commit-every", type=int, default=10, help="batches between commits "
                        "(what a lost rank rolls back to; where newcomers join)")
    parser.add_argument("--data-dir", default=FASHION_MNIST_DIR)
    parser.add_argument("--limit-train", type=int, default=0,
                        help="train on this many images per epoch (0: all 60000)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="write the per-epoch results here (the last rank 0)")
    args = parser.parse_args()
    if args.epochs < 1 or args.batch_size < 1 or args.commit_every < 1 or not args.lr > 0:
        parser.error("--epochs, --batch-size and --commit-every must be at least 1, --lr positive")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    hvd.init()
    train_x, train_y = load(args.data_dir, "train")
    test_x, test_y = load(args.data_dir, "test")
    if args.limit_train:
        train_x, train_y = train_x[:args.limit_train], train_y[:args.limit_train]
    dataset = torch.utils.data.TensorDataset(train_x, train_y)
    model = Net()
    max_ranks = int(os.environ.get("RINGD_ELASTIC_MAX_RANKS", hvd.size()))
    optimizer = hvd.DistributedOptimizer(
        torch.optim.Adam(model.parameters(), lr=args.lr * max_ranks ** 0.5),
        named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=args.seed)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, results=[])
    started = time.time()

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, args.epochs):
            state.sampler.set_epoch(state.epoch)
            loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size,
                                                 sampler=state.sampler)
            model.train()
            loss_sum, batches = 0.0, 0
            for i, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                loss_sum, batches = loss_sum + loss.item(), batches + 1
                state.sampler.record_batch(i, args.batch_size)
                if (i + 1) % args.commit_every == 0:
                    state.commit()
            # The test set, shared by the ranks there are now; counts summed across them.
            model.eval()
            share = slice(hvd.rank(), None, hvd.size())
            with torch.no_grad():
                correct = (model(test_x[share]).argmax(1) == test_y[share]).sum().item()
            totals = hvd.allreduce(torch.tensor([correct, len(test_y[share]), loss_sum, batches],
                                                dtype=torch.float64), op=hvd.Sum,
                                   name=f"epoch_totals.{state.epoch}")
            result = {"epoch": state.epoch + 1, "ranks": hvd.size(),
                      "loss": totals[2].item() / max(1.0, totals[3].item()),
                      "test_accuracy": totals[0].item() / totals[1].item()}
            state.results = state.results + [result]
            if hvd.rank() == 0:
                print(f"epoch {result['epoch']}/{args.epochs}  loss {result['loss']:.4f}  test "
                      f"accuracy {result['test_accuracy']:.4f}  ({hvd.size()} ranks)", flush=True)
            # The next epoch in the committed state: re-entered after this commit, train() goes
            # on there instead of repeating this epoch's evaluation.
            state.epoch += 1
            state.commit()

    train(state)
    if hvd.rank() == 0:
        print(f"final test accuracy {state.results[-1]['test_accuracy']:.4f} after "
              f"{args.epochs} epochs in {time.time() - started:.1f} s", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"framework": "ringd-elastic", "ranks": hvd.size(), "seed": args.seed,
                           "epochs": state.results}, f, indent=1)
    hvd.shutdown()


if __name__ == "__main__":
    main()
