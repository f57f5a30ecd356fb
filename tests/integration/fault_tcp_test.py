#!/usr/bin/env python3
"""(c) kill -9 of rank 1 during a 64 MB allreduce loop over standalone tcp: every other rank exits
non-zero within 2x --timeout, and says which rank was lost."""
import os
import re
import signal
import time

import harness
from harness import check

TIMEOUT_S = 10


def test(ringd, args):
    ranks, victim = 4, 1
    job = harness.Job(ringd, ranks, ["bench", "allreduce", "-b", "64M", "-e", "64M", "--iters",
                                     "100000", "--warmup", "0", "--timeout", str(TIMEOUT_S)])
    try:
        job.wait_for_stdout(0, "#wrong", timeout=60)  # the table header: everyone is connected
        time.sleep(2.5)  # past filling 64 MB, well inside the allreduce loop
        os.kill(job.processes[victim][0].pid, signal.SIGKILL)
        killed = time.monotonic()
        codes = job.wait(timeout=2 * TIMEOUT_S + 5)
        seconds = time.monotonic() - killed
    finally:
        job.kill_all()
    check(seconds <= 2 * TIMEOUT_S, f"the survivors took {seconds:.1f} s to exit (> 2 x {TIMEOUT_S} s)")
    for rank in range(ranks):
        if rank == victim:
            continue
        stdout, stderr = job.output(rank)
        check(codes[rank] != 0, f"rank {rank} exited 0 after rank {victim} died")
        check("ringd: error:" in stderr, f"rank {rank}: no 'ringd: error:' line: {stderr}")
        check(re.search(rf"\brank {victim}\b", stderr) is not None,
              f"rank {rank}'s error does not name rank {victim}: {stderr}")
        print(f"ok   rank {rank}: exit {codes[rank]}: {stderr.strip().splitlines()[-1]}")
    print(f"ok   all survivors ended {seconds:.1f} s after the kill")


if __name__ == "__main__":
    harness.main(test)
