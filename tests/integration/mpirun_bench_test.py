#!/usr/bin/env python3
"""(a) `mpirun -np N ringd bench ... --check` on one transport (mpi or tcp): allreduce on 2, 3, 4
and 8 ranks (64 MB on 4), broadcast/allgather/reducescatter on 3, every row #wrong 0, and the
JSON lines carry exactly the documented keys. The tcp transport bootstraps through MPI, or through
--rendezvous when ringd was built without MPI.

usage: mpirun_bench_test.py RINGD TRANSPORT HAVE_MPI"""
import os
import sys

import harness
from harness import check


def test(ringd, args):
    transport, have_mpi = args[0], args[1] == "1"
    harness.require_mpirun()
    if not have_mpi and transport == "mpi":
        print("SKIP: ringd was built without MPI: no mpi transport to test")
        sys.exit(harness.SKIP)
    json_dir = harness.work_dir("ringd-json-")
    common = ["--transport", transport, "--check", "--iters", "3", "--warmup", "1",
              "--timeout", "60"]
    # (ranks, collective, min, max, factor, extra flags)
    cases = [
        (2, "allreduce", 4, 1 << 20, 8, []),
        (3, "allreduce", 4, 4 << 20, 8, []),
        (3, "allreduce", 2, 1 << 20, 32, ["--dtype", "bfloat16", "--in-place"]),
        (3, "allreduce", 4, 256 << 10, 16, ["--algorithm", "rd", "--dtype", "int32", "--op",
                                            "prod"]),
        (4, "allreduce", 4, 64 << 20, 4, []),
        (8, "allreduce", 4, 4 << 20, 8, []),
        (3, "broadcast", 4, 4 << 20, 8, ["--root", "2"]),
        (3, "allgather", 12, 3 << 20, 8, ["--dtype", "int32"]),
        (3, "allgather", 12, 3 << 20, 8, ["--in-place", "--dtype", "half"]),
        (3, "reducescatter", 12, 3 << 20, 8, ["--dtype", "half", "--op", "max"]),
        (3, "reducescatter", 12, 3 << 20, 8, ["--in-place", "--op", "avg", "--dtype", "double"]),
    ]
    for index, (ranks, collective, low, high, factor, extra) in enumerate(cases):
        label = f"{transport} np={ranks} {collective} {' '.join(extra)}".strip()
        json_path = os.path.join(json_dir, f"case{index}.jsonl")
        # Without MPI in ringd, the tcp transport under mpirun finds rank 0 through --rendezvous.
        rendezvous = [] if have_mpi else ["--rendezvous", f"127.0.0.1:{harness.free_port()}"]
        command = harness.mpirun(ranks, [ringd, "bench", collective, "-b", str(low), "-e",
                                         str(high), "-f", str(factor), "--json", json_path,
                                         *common, *rendezvous, *extra])
        code, stdout, stderr, seconds = harness.run(command, label, timeout=120)
        check(code == 0, f"{label}: exit code {code}\nstdout:\n{stdout}\nstderr:\n{stderr}")
        rows = harness.sweep_rows(low, high, factor)
        harness.check_bench_output(label, stdout, rows)
        harness.check_json(label, json_path, rows, ranks, transport, collective)
        print(f"ok   {label}: {rows} rows in {seconds:.1f} s", flush=True)


if __name__ == "__main__":
    harness.main(test)
