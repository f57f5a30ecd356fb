#!/usr/bin/env python3
"""(c) kill -9 of rank 1 during a 64 MB allreduce loop under mpirun with the mpi transport: the job
ends non-zero within 2x --timeout, and its output (ringd's or mpirun's own) names the dead rank.

usage: fault_mpi_test.py RINGD HAVE_MPI"""
import os
import re
import signal
import subprocess
import sys
import time

import harness
from harness import check

TIMEOUT_S = 10


def test(ringd, args):
    harness.require_mpirun()
    if args[0] != "1":
        print("SKIP: ringd was built without MPI: no mpi transport to test")
        sys.exit(harness.SKIP)
    ranks, victim = 4, 1
    directory = harness.work_dir("ringd-fault-mpi-")
    # Each rank records its pid so the test can kill exactly rank 1.
    wrapper = ["bash", "-c", f'echo $$ > {directory}/pid.$OMPI_COMM_WORLD_RANK; exec "$@"', "ringd"]
    command = harness.mpirun(ranks, [*wrapper, ringd, "bench", "allreduce", "--transport", "mpi",
                                     "-b", "64M", "-e", "64M", "--iters", "100000", "--warmup",
                                     "0", "--timeout", str(TIMEOUT_S)])
    out = open(os.path.join(directory, "out"), "w+")
    job = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=harness.environment(),
                           start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "#wrong" not in open(out.name).read():
            check(job.poll() is None, f"mpirun ended early: {open(out.name).read()}")
            check(time.monotonic() < deadline, "no table header after 60 s")
            time.sleep(0.05)
        time.sleep(2.5)  # past filling 64 MB, well inside the allreduce loop
        pid = int(open(os.path.join(directory, f"pid.{victim}")).read())
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        try:
            code = job.wait(timeout=2 * TIMEOUT_S + 5)
        except subprocess.TimeoutExpired:
            raise harness.Failure(f"mpirun still running {2 * TIMEOUT_S + 5} s after the kill: "
                                  f"{open(out.name).read()}")
        seconds = time.monotonic() - killed
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    output = open(out.name).read()
    check(code != 0, f"mpirun exited 0 after rank {victim} was killed: {output}")
    check(seconds <= 2 * TIMEOUT_S, f"the job took {seconds:.1f} s to end (> 2 x {TIMEOUT_S} s)")
    check(re.search(rf"\brank {victim}\b", output) is not None,
          f"nothing names rank {victim}: {output}")
    named = [line for line in output.splitlines() if re.search(rf"\brank {victim}\b", line)]
    print(f"ok   mpirun exit {code} {seconds:.1f} s after the kill: {named[0].strip()}")


if __name__ == "__main__":
    harness.main(test)
