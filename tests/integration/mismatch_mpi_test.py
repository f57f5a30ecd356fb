#!/usr/bin/env python3
"""Ranks that disagree on the message size (an MPMD mpirun: rank 0 runs 4 KB, rank 1 8 KB) fail
with a mismatch error from the mpi transport instead of hanging or returning wrong data.

usage: mismatch_mpi_test.py RINGD HAVE_MPI"""
import sys

import harness
from harness import check

TIMEOUT_S = 10


def test(ringd, args):
    harness.require_mpirun()
    if args[0] != "1":
        print("SKIP: ringd was built without MPI: no mpi transport to test")
        sys.exit(harness.SKIP)
    common = ["bench", "allreduce", "--transport", "mpi", "--timeout", str(TIMEOUT_S), "--iters",
              "2"]
    command = ["mpirun", *harness.MPIRUN_FLAGS,
               "-np", "1", ringd, *common, "-b", "4K", "-e", "4K", ":",
               "-np", "1", ringd, *common, "-b", "8K", "-e", "8K"]
    code, stdout, stderr, seconds = harness.run(command, "mismatch", timeout=4 * TIMEOUT_S)
    output = stdout + stderr
    check(code != 0, f"mpirun exited 0 although the ranks disagree: {output}")
    check(seconds <= 2 * TIMEOUT_S, f"took {seconds:.1f} s to fail")
    check("ringd: error:" in output and "different collectives" in output,
          f"no mismatch error: {output}")
    line = next(l for l in output.splitlines() if "ringd: error:" in l)
    print(f"ok   exit {code} in {seconds:.1f} s: {line}")


if __name__ == "__main__":
    harness.main(test)
