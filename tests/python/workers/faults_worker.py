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
             Rank 1 polls a tensor of its own (a poll is not a wait: the ranks are not
             deadlocked) until rank 0's shutdown ends it.
  ddp_uneven DDP over the backend "ringd" with uneven data: rank 0 runs 3 steps, rank 1 runs 2
             and then calls dist.barrier(). Both must raise, naming the deadlock, within
             seconds (rank 0's backward waits on a torch Future, out of ringd's sight: its
             completion thread's waits are made for it).
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
        handle = hvd.allreduce_async(torch.ones(3), name="only.rank1")
        while not hvd.poll(handle):
            time.sleep(0.05)
        try:
            hvd.synchronize(handle)
            result = {"error": None}
        except hvd.RingdError as error:
            result = {"error": type(error).__name__}
        write(rank, result)


def ddp_uneven(rank, size):
    import torch.distributed as dist

    dist.init_process_group("ringd")
    torch.manual_seed(1)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
    start = time.monotonic()
    try:
        for _ in range(3 if rank == 0 else 2):
            model(torch.ones(2, 8)).sum().backward()
        dist.barrier()
        result = {"error": None}
    except RuntimeError as error:
        result = {"error": type(error).__name__, "message": str(error)}
    result["seconds"] = time.monotonic() - start
    write(rank, result)
    hvd.shutdown()


def main():
    scenario = sys.argv[2]
    if scenario.startswith("ddp_"):  # init_process_group("ringd") opens the job
        {"ddp_dead_peer": ddp_dead_peer, "ddp_uneven": ddp_uneven}[scenario](
            int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
        return
    hvd.init()
    {"dead_peer": dead_peer, "ctrl_c": ctrl_c}[scenario](hvd.rank(), hvd.size())


if __name__ == "__main__":
    main()
