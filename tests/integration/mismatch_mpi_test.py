#!/usr/bin/env python3
"""Ranks that disagree, through the mpi transport (MPMD mpirun, one rank each side):
  - on the message size (4 KB vs 8 KB): a mismatch error, not a hang or wrong data;
  - on the number of collectives (rank 1 stops after 4 KB): rank 0 times out after --timeout with
    a message naming the peer and the bytes it waited for;
  - on the dtype at the same width (4 ranks, rank 1 int32, the others float): every rank fails with
    kMismatch naming the dtype (the signature in the message tags; a peer's marked abort).

usage: mismatch_mpi_test.py RINGD HAVE_MPI"""
import re
import sys

import harness
from harness import check

TIMEOUT_S = 10


def run_mpmd(ringd, label, rank0_flags, rank1_flags, timeout_s):
    common = ["bench", "allreduce", "--transport", "mpi", "--timeout", str(timeout_s), "--iters",
              "2"]
    command = ["mpirun", *harness.MPIRUN_FLAGS, "-np", "1", ringd, *common, *rank0_flags, ":",
               "-np", "1", ringd, *common, *rank1_flags]
    code, stdout, stderr, seconds = harness.run(command, label, timeout=4 * TIMEOUT_S)
    output = stdout + stderr
    check(code != 0, f"{label}: mpirun exited 0 although the ranks disagree: {output}")
    check(seconds <= 2 * TIMEOUT_S, f"{label}: took {seconds:.1f} s to fail")
    lines = [l for l in output.splitlines() if l.startswith("ringd: error:")]
    check(lines, f"{label}: no 'ringd: error:' line: {output}")
    print(f"ok   {label}: exit {code} in {seconds:.1f} s: {lines[0]}")
    return lines[0], seconds


def test(ringd, args):
    harness.require_mpirun()
    if args[0] != "1":
        print("SKIP: ringd was built without MPI: no mpi transport to test")
        sys.exit(harness.SKIP)
    line, _ = run_mpmd(ringd, "size mismatch", ["-b", "4K", "-e", "4K"], ["-b", "8K", "-e", "8K"],
                       TIMEOUT_S)
    check("mismatch across ranks" in line and re.search(r"from peer rank [01]\b", line),
          f"size mismatch: not a mismatch error: {line}")

    timeout_s = 3
    line, seconds = run_mpmd(ringd, "missing collective", ["-b", "4K", "-e", "16K"],
                             ["-b", "4K", "-e", "4K"], timeout_s)
    check(seconds >= timeout_s, f"missing collective: failed after {seconds:.1f} s, before the "
                                f"{timeout_s} s timeout")
    check(re.search(r"timeout: rank 0: .*timed out after 3000 ms waiting to receive \d+ bytes "
                    r"from peer rank 1 \(mpi\)", line) is not None,
          f"missing collective: unexpected message: {line}")

    # Same byte count, another dtype: the tag's signature differs; every rank names it.
    common = ["bench", "allreduce", "--transport", "mpi", "--timeout", str(TIMEOUT_S), "--iters",
              "2", "-b", "4K", "-e", "4K"]
    command = ["mpirun", *harness.MPIRUN_FLAGS, "-np", "1", ringd, *common, ":", "-np", "1", ringd,
               *common, "--dtype", "int32", ":", "-np", "2", ringd, *common]
    code, stdout, stderr, seconds = harness.run(command, "dtype mismatch", timeout=4 * TIMEOUT_S)
    lines = [l for l in (stdout + stderr).splitlines() if l.startswith("ringd: error:")]
    check(code != 0 and len(lines) == 4,
          f"dtype mismatch: exit {code}, {len(lines)} error lines of 4: {stdout + stderr}")
    for line in lines:
        check(line.startswith("ringd: error: mismatch across ranks:") and
              "disagree on the dtype (" in line, f"dtype mismatch: {line}")
    print(f"ok   dtype mismatch: all 4 ranks fail with a mismatch naming the dtype in {seconds:.1f} s")


if __name__ == "__main__":
    harness.main(test)
