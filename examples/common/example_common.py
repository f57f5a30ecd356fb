"""What the PyTorch and TensorFlow examples share, framework-free (NumPy only): the gradient
profiles of real networks, the synthetic benchmark's flags, timed loop and report, and
Fashion-MNIST's IDX files. The examples put this folder on sys.path."""
import argparse
import gzip
import json
import os
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"


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


def add_synthetic_flags(parser: argparse.ArgumentParser):
    """The synthetic benchmark's flags (after Horovod's), the same for every framework."""
    parser.add_argument("--profile", default="resnet50")
    parser.add_argument("--compute-ms", type=float, default=100.0,
                        help="modeled forward + backward time per step")
    parser.add_argument("--batch-size", type=int, default=32, help="images per step per rank")
    parser.add_argument("--num-warmup-batches", type=int, default=3)
    parser.add_argument("--num-batches-per-iter", type=int, default=5)
    parser.add_argument("--num-iters", type=int, default=5)
    parser.add_argument("--fp16-allreduce", action="store_true")
    parser.add_argument("--json", help="write the result here (rank 0)")


def check_synthetic_flags(parser, args):
    if min(args.batch_size, args.num_batches_per_iter, args.num_iters) < 1 or \
            args.num_warmup_batches < 0 or not args.compute_ms >= 0:
        parser.error("sizes and counts must be at least 1 (warm-up 0), --compute-ms >= 0")


def describe_model(args, tensors, ranks):
    total = sum(count for _, count in tensors)
    print(f"model: {args.profile} ({len(tensors)} tensors, {total / 1e6:.1f} M parameters, "
          f"{total * 4 / 2**20:.1f} MiB of gradients), modeled compute {args.compute_ms:g} "
          f"ms/step, batch {args.batch_size}/rank, {ranks} ranks, {args.framework}", flush=True)


def run_synthetic(step, args, rank, ranks):
    """Warm-up steps, then --num-iters timed iterations of --num-batches-per-iter steps; rank 0
    prints each and the mean with its 95% interval, and writes --json."""
    for _ in range(args.num_warmup_batches):
        step()
    rates = []
    for i in range(args.num_iters):
        started = time.time()
        for _ in range(args.num_batches_per_iter):
            step()
        elapsed = time.time() - started
        rates.append(args.batch_size * args.num_batches_per_iter / elapsed)
        if rank == 0:
            print(f"iter #{i}: {rates[-1]:.1f} img/s per rank "
                  f"({elapsed / args.num_batches_per_iter * 1000:.1f} ms/step)", flush=True)
    mean = float(np.mean(rates))
    interval = float(1.96 * np.std(rates))
    if rank == 0:
        print(f"img/s per rank: {mean:.1f} +- {interval:.1f}")
        print(f"total img/s on {ranks} ranks: {mean * ranks:.1f} +- {interval * ranks:.1f}",
              flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"framework": args.framework, "profile": args.profile,
                           "ranks": ranks, "compute_ms": args.compute_ms,
                           "batch_size": args.batch_size, "img_per_s_per_rank": mean,
                           "interval": interval, "rates": rates}, f, indent=1)


def read_idx(path):
    """An IDX file (optionally .gz) as a NumPy array: images uint8 [n, 28, 28], labels uint8 [n]."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    offset = 4 + 4 * dims
    expected = int(np.prod(shape))
    if len(data) - offset != expected:
        raise ValueError(f"{path}: {len(data) - offset} bytes of data, the header says {expected}")
    return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(shape)


def fashion_mnist(data_dir, split):
    """(images as float32 [n, 28, 28], normalized with Fashion-MNIST's mean and deviation, labels
    as int64 [n]) of split "train" or "test"."""
    def find(stem):
        for name in (stem, stem + ".gz"):
            path = os.path.join(data_dir, name)
            if os.path.exists(path):
                return path
        raise SystemExit(f"{os.path.join(data_dir, stem)}[.gz] not found: apt-get install "
                         "dataset-fashion-mnist, or pass --data-dir")

    prefix = "train" if split == "train" else "t10k"
    images = read_idx(find(f"{prefix}-images-idx3-ubyte")).astype(np.float32) / 255.0
    images = (images - 0.2860) / 0.3530
    return images, read_idx(find(f"{prefix}-labels-idx1-ubyte")).astype(np.int64)
