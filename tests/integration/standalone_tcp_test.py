#!/usr/bin/env python3
"""(b) The tcp transport without mpirun: N processes joined by --rank/--size/--rendezvous (rank 0
serves the rendezvous store), allreduce --check on 2, 3, 4 and 8 ranks."""
import os

import harness
from harness import check


def test(ringd, args):
    for ranks, high in [(2, 4 << 20), (3, 4 << 20), (4, 16 << 20), (8, 1 << 20)]:
        label = f"standalone tcp np={ranks}"
        low, factor = 4, 8
        json_path = os.path.join(harness.work_dir("ringd-json-"), "out.jsonl")
        job = harness.Job(ringd, ranks, ["bench", "allreduce", "--check", "-b", str(low), "-e",
                                         str(high), "-f", str(factor), "--iters", "3", "--warmup",
                                         "1", "--timeout", "60", "--json", json_path])
        codes = job.wait(timeout=120)
        outputs = [job.output(rank) for rank in range(ranks)]
        check(codes == [0] * ranks, f"{label}: exit codes {codes}; outputs {outputs}")
        rows = harness.sweep_rows(low, high, factor)
        harness.check_bench_output(label, outputs[0][0], rows)
        harness.check_json(label, json_path, rows, ranks, "tcp", "allreduce")
        for rank in range(1, ranks):
            check(outputs[rank][0] == "", f"{label}: rank {rank} wrote to stdout: {outputs[rank][0]}")
        print(f"ok   {label}: {rows} rows", flush=True)


if __name__ == "__main__":
    harness.main(test)
