"""What careless users do, on the ranks of a torchrun-style job (NumPy API); see test_misuse.py.
argv[2] is the scenario; each rank writes rank<N>.json with what it saw.

  order             rank 0 calls allreduce a then b synchronously, rank 1 b then a
  uneven_barrier    rank 0 runs 4 steps, rank 1 runs 3 and then waits in barrier()
  early_shutdown    rank 1 completes 3 steps and calls ringd.shutdown(); rank 0 runs a 4th
  early_exit        rank 1 completes 3 steps and returns from the script (no shutdown)
  early_exception   rank 1 completes 3 steps and raises an uncaught ValueError
  threads           two threads of each rank make unnamed calls at once
  fork              after init(), children made by os.fork() and by multiprocessing's fork
                    try a collective and end through sys.exit()
  init_ctrl_c       rank 1 never calls init(); rank 0 prints "opening" and waits in init()
                    until the test's SIGINT, which must raise KeyboardInterrupt at once
"""

import json
import multiprocessing
import os
import pathlib
import sys
import threading
import time

import numpy as np

import ringd

OUT = pathlib.Path(sys.argv[1])


def write(rank, result, name=None):
    (OUT / (name or f"rank{rank}.json")).write_text(json.dumps(result))


def attempt(body):
    """{"error": class name or None, "message", "seconds", "mismatch": isinstance}."""
    start = time.monotonic()
    try:
        body()
        result = {"error": None}
    except ringd.RingdError as error:
        result = {"error": type(error).__name__, "message": str(error),
                  "mismatch": isinstance(error, ringd.MismatchError)}
    result["seconds"] = time.monotonic() - start
    return result


def one(name):
    return ringd.allreduce(np.ones(3, np.float32), op=ringd.Sum, name=name)


def order(rank, size):
    first, second = ("b", "a") if rank == 1 else ("a", "b")
    result = attempt(lambda: (one(first), one(second)))
    after = one("after")  # the engine still works
    result["after"] = after.tolist()
    write(rank, result)


def uneven_barrier(rank, size):
    steps = 4 if rank == 0 else 3

    def run():
        for _ in range(steps):
            one("grad")
        ringd.barrier()

    write(rank, attempt(run))


def steps_then(rank, ending):
    for _ in range(3):
        one("grad")
    if rank == 0:
        write(rank, attempt(lambda: one("grad")))
        return
    if ending == "shutdown":
        ringd.shutdown()
    elif ending == "exception":
        raise ValueError("boom on rank 1")
    # "exit": nothing; the interpreter's exit shuts the job down


def threads(rank, size):
    other_tried = threading.Event()
    seen = {}

    def first():
        seen["first"] = ringd.allreduce(np.full(2, rank + 1.0), op=ringd.Sum).tolist()
        other_tried.wait(30)
        seen["first_again"] = ringd.allreduce(np.full(2, rank + 1.0), op=ringd.Sum).tolist()

    def second():
        try:
            ringd.allreduce(np.full(2, 100.0), op=ringd.Sum)
            seen["second"] = "no error"
        except ringd.InvalidArgumentError as error:
            seen["second"] = str(error)
        finally:
            other_tried.set()

    one_thread = threading.Thread(target=first)
    one_thread.start()
    while "first" not in seen:
        time.sleep(0.01)
    other = threading.Thread(target=second)
    other.start()
    other.join()
    one_thread.join()
    # Once the first thread has ended, another may take over the unnamed calls.
    later = threading.Thread(
        target=lambda: seen.update(later=ringd.allreduce(np.ones(2), op=ringd.Sum).tolist()))
    later.start()
    later.join()
    write(rank, seen)


def _child(rank, how):
    write(rank, attempt(lambda: one("in.child")), name=f"child{rank}-{how}.json")
    sys.exit(0)


def fork(rank, size):
    one("before")
    result = {}
    pid = os.fork()
    if pid == 0:
        _child(rank, "os.fork")  # sys.exit: atexit handlers run here
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            result["os.fork"] = os.waitstatus_to_exitcode(status)
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        result["os.fork"] = "still running after 15 s"
    process = multiprocessing.get_context("fork").Process(target=_child, args=(rank, "mp"))
    process.start()
    process.join(15)
    if process.is_alive():
        process.kill()
        process.join()
        result["mp"] = "still running after 15 s"
    else:
        result["mp"] = process.exitcode
    result["after"] = one("after").tolist()  # the parent's job still works
    write(rank, result)


def init_ctrl_c():
    rank = int(os.environ["RANK"])
    if rank == 1:
        time.sleep(60)  # never joins; the test kills it
        return
    print("opening", flush=True)
    start = time.monotonic()
    try:
        ringd.init()
        result = {"interrupted": False}
    except KeyboardInterrupt:
        result = {"interrupted": True}
    result["seconds"] = time.monotonic() - start
    write(rank, result)


def main():
    scenario = sys.argv[2]
    if scenario == "init_ctrl_c":
        init_ctrl_c()
        return
    ringd.init()
    rank, size = ringd.rank(), ringd.size()
    if scenario.startswith("early_"):
        steps_then(rank, scenario[len("early_"):])
    else:
        {"order": order, "uneven_barrier": uneven_barrier, "threads": threads,
         "fork": fork}[scenario](rank, size)
    if scenario != "early_exit":
        ringd.shutdown()


if __name__ == "__main__":
    main()
