#!/usr/bin/env python3
"""bench/plot_allreduce.py on made-up rounds: the table shows each size's median round (or its
fastest with --stat min) with the rounds' range, and the verdict names the sizes where ringd is
above 1.05 x the best reference.

  plot_allreduce_test.py REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile


def row(size, time_us):
    busbw = size / (time_us * 1e-6) * 1.5 / 1e9
    return {"op": "allreduce", "bytes": size, "count": size // 4, "dtype": "float32", "redop": "sum",
            "ranks": 4, "transport": "tcp", "time_us": time_us, "algbw_GBps": busbw / 1.5,
            "busbw_GBps": busbw, "wrong": 0}


def write(directory, name, rounds):
    with open(os.path.join(directory, name + ".jsonl"), "w") as f:
        for size, times in rounds.items():
            for time_us in times:
                f.write(json.dumps(row(size, time_us)) + "\n")


def run(repo, directory, *extra):
    return subprocess.run([sys.executable, os.path.join(repo, "bench", "plot_allreduce.py"),
                           "--dir", directory, *extra], check=True, capture_output=True,
                          text=True).stdout


def main():
    repo = sys.argv[1]
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    out = tempfile.mkdtemp(prefix="ringd-plot-allreduce-")
    # 4 KB: ringd's rounds 90, 200, 95 (median 95) against Open MPI's 100, 80, 120 (median 100):
    # within 1.05 by the median, 1.12 x by the fastest rounds. 1 MB: ringd's median 1100 against
    # 1000: 1.10 x either way.
    write(out, "ringd-tcp", {4096: [90, 200, 95], 1 << 20: [1100, 1050, 1300]})
    write(out, "openmpi", {4096: [100, 80, 120], 1 << 20: [1000, 990, 1200]})

    median = run(repo, out)
    lines = {line.split(" | ")[0].lstrip("| "): line for line in median.splitlines()
             if line.startswith("| ")}
    expect("95 µs (" in lines.get("4K", "") and "; 90 µs-200 µs)" in lines.get("4K", ""),
           "4K median cell with range: %r" % lines.get("4K"))
    expect("| 0.95 |" in lines.get("4K", ""), "4K ratio 0.95: %r" % lines.get("4K"))
    expect("| 1.10 |" in lines.get("1M", ""), "1M ratio 1.10: %r" % lines.get("1M"))
    expect("ringd above 1.05 x the best reference at: 1M (1.10 x)" in median,
           "median verdict: %r" % median)

    fastest = run(repo, out, "--stat", "min")
    expect("4K (1.12 x), 1M (1.06 x)" in fastest, "min verdict: %r" % fastest)

    write(out, "ringd-tcp", {4096: [80, 80, 81], 1 << 20: [1000, 1000, 1000]})
    expect("ringd within 1.05 x the best reference at all 2 sizes" in run(repo, out),
           "verdict when ringd is within the bound")

    # Two ringd transports: the best of them is within the bound, ringd mpi alone is not.
    write(out, "ringd-mpi", {4096: [200, 210, 220], 1 << 20: [1000, 1000, 1000]})
    both = run(repo, out)
    expect("ringd within 1.05 x the best reference at all 2 sizes" in both and
           "ringd tcp within 1.05 x the best reference at all 2 sizes" in both and
           "ringd mpi above 1.05 x the best reference at: 4K (2.10 x)" in both,
           "per-transport verdicts: %r" % both)

    one = tempfile.mkdtemp(prefix="ringd-plot-allreduce-one-")
    write(one, "ringd-tcp", {4096: [90]})
    single = run(repo, one)
    expect("90 µs (" in single and "µs-" not in single and "reference" not in single,
           "one round, no reference: %r" % single)

    for failure in failures:
        print("FAIL:", failure)
    if failures:
        sys.exit(1)
    print("plot_allreduce_test: ok")


if __name__ == "__main__":
    main()
