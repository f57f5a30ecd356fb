"""Failures on the ranks of a torchrun-style job; see test_torch_faults.py. argv[2] is the
scenario:

  dead_peer  the last rank dies (SIGKILL) after a first allreduce; the others' next allreduce
             must raise a RingdError within the timeout. Each survivor writes rank<N>.json.
  ddp_dead_peer  DDP over the torch.distributed backend "ringd": the last rank dies (SIGKILL)
             after two steps; the others' next backward (the reducer's allreduce, whose Future
             the group's completion thread fails) must raise within the timeout, as must a
             plain dist.all_reduce after it.
  ctrl_c     rank 0 waits on an allreduce that rank 1 never submits and prints "waiting"; the
             test sends it SIGINT, which must raise KeyboardInterrupt out of synchronize().
             Rank 1 waits on a tensor of its own until rank 0's shutdown ends it.
"""

import json
import os
import pathlib
import signal
import sys
import time

import torch

import ringd.torch as hvd


def write(rank, result):
    (pathlib.Path(sys.argv[1]) / f"rank{rank}.json").write_text(json.dumps(result))


def dead_peer(rank, size):
    hvd.allreduce(torch.ones(4), op=hvd.Sum, name="before")
    if rank == size - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        hvd.allreduce(torch.ones(4), op=hvd.Sum, name="after.death")
        result = {"error": None}
    except hvd.RingdError as error:
        result = {"error": type(error).__name__, "message": str(error)}
    result["seconds"] = time.monotonic() - start
    write(rank, result)
    hvd.shutdown()


def ddp_dead_peer(rank, size):
    import torch.distributed as dist

    dist.init_process_group("ringd")
    torch.manual_seed(1)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
    for _ in range(2):
        model(torch.ones(2, 8)).sum().backward()
    if rank == size - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    result = {}
    for what, step in (("backward", lambda: model(torch.ones(2, 8)).sum().backward()),
                       ("all_reduce", lambda: dist.all_reduce(torch.ones(3)))):
        start = time.monotonic()
        try:
            step()
            result[what] = {"error": None}
        except RuntimeError as error:
            result[what] = {"error": type(error).__name__, "message": str(error)}
        result[what]["seconds"] = time.monotonic() - start
    write(rank, result)
    hvd.shutdown()


def ctrl_c(rank, size):
    if rank == 0:
        handle = hvd.allreduce_async(torch.ones(3), name="never.joined")
        print("waiting", flush=True)
        try:
            hvd.synchronize(handle)
            result = {"interrupted": False}
        except KeyboardInterrupt:
            result = {"interrupted": True, "still_pending": not hvd.poll(handle)}
        write(rank, result)
        hvd.shutdown()  # ends rank 1's wait too
    else:
        try:
            hvd.allreduce(torch.ones(3), name="only.rank1")
            result = {"error": None}
        except hvd.RingdError as error:
            result = {"error": type(error).__name__}
        write(rank, result)


def main():
    scenario = sys.argv[2]
    if scenario == "ddp_dead_peer":  # init_process_group("ringd") opens the job
        ddp_dead_peer(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
        return
    hvd.init()
    {"dead_peer": dead_peer, "ctrl_c": ctrl_c}[scenario](hvd.rank(), hvd.size())


if __name__ == "__main__":
    main()
