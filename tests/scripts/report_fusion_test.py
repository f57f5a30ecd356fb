#!/usr/bin/env python3
"""bench/report_fusion.py on made-up rounds: the fused verdict is the median, over every round's
steps, of each step over the one-buffer allreduce timed just before it (--paired), not the fastest
round's mean over its best one-buffer; without paired steps the old figure decides; the local
devices' lines and the table come out.

  report_fusion_test.py REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile


def replay(run, round_, steps, one_buffer_ms, compute_ms=0, devices=1, paired=True):
    """steps: [(step_ms, one_buffer_ms_before_it)]"""
    step_list = []
    for step_ms, before in steps:
        step = {"step_ms": step_ms, "tail_ms": step_ms, "negotiation_ms": 0.1, "cycles": 2,
                "coordinator_rounds": 0, "cache_hits": 10, "buckets": 2}
        if paired:
            step["one_buffer_ms"] = before
        step_list.append(step)
    mean = sum(s for s, _ in steps) / len(steps)
    ideal = max(compute_ms, one_buffer_ms)
    return {"run": run, "round": round_, "profile": "resnet50", "tensors": 161,
            "bytes": 100 << 20, "ranks": 4, "transport": "tcp", "local_devices": devices,
            "hierarchy": "reduce-bcast" if devices > 1 else "none", "compute_ms": compute_ms,
            "one_buffer_ms": one_buffer_ms, "ideal_ms": ideal, "mean_step_ms": mean,
            "negotiation_ms": 0.2, "negotiation_share": 0.2 / mean, "wrong": 0,
            "steps": step_list}


def report(out, runs, meta):
    runs_path = os.path.join(out, "runs.jsonl")
    with open(runs_path, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in runs))
    meta_path = os.path.join(out, "meta.json")
    with open(meta_path, "w") as f:
        json.dump(meta, f)
    table_path = os.path.join(out, "table.md")
    done = subprocess.run([sys.executable, os.path.join(REPO, "bench", "report_fusion.py"),
                           "--runs", runs_path, "--meta", meta_path, "--table", table_path],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"FAIL: report_fusion.py exited {done.returncode}:\n{done.stderr}")
    return open(table_path).read()


def expect(text, lines, absent=()):
    for line in lines:
        if line not in text:
            sys.exit(f"FAIL: expected line missing: {line}\n--- table ---\n{text}")
    for line in absent:
        if line in text:
            sys.exit(f"FAIL: unexpected line: {line}\n--- table ---\n{text}")


def main():
    out = tempfile.mkdtemp(prefix="ringd-report-fusion-")
    meta = {"command": "test", "commit": "abc", "nodes": 4, "rate": "10gbit", "line_gbps": 1.0}
    # Round 1 is the fastest by mean (300) but its best one-buffer (250) makes it 1.20 unpaired;
    # paired, the seven steps' ratios are 1.0, 1.05, 1.2 | 1.1, 1.0 | 0.9, 1.3: median 1.05.
    runs = [
        replay("fused", 1, [(300, 300), (315, 300), (285, 237.5)], 250),
        replay("fused", 2, [(330, 300), (320, 320)], 300),
        replay("fused", 3, [(360, 400), (390, 300)], 330),
        replay("unfused", 1, [(600, 0)], 250, paired=False),
        replay("overlapped", 1, [(330, 0)], 300, compute_ms=310, paired=False),
    ]
    text = report(out, runs, meta)
    expect(text, [
        "| fused step (compute 0) / one-buffer allreduce, paired: median of 7 steps | 1.050 "
        "| <= 1.10 | yes |",
        "fused, paired (step / the one-buffer allreduce just before it): median 1.050 over 7 "
        "steps (per round: 1.050, 1.050, 1.100; min 0.900, max 1.300)",
        "fused, unpaired (the fastest round's mean step / that round's best one-buffer "
        "allreduce, measured before the steps): 1.200",
        "| overlapped step / ideal | 1.065 | <= 1.15 | yes |",
    ])

    # Paired but slow: the verdict says NO even though one round looks good.
    runs = [replay("fused", 1, [(330, 300), (340, 300), (200, 300)], 100),
            replay("fused", 2, [(360, 300)], 100)]
    text = report(out, runs, meta)
    expect(text, ["| fused step (compute 0) / one-buffer allreduce, paired: median of 4 steps "
                  "| 1.117 | <= 1.10 | NO |"])

    # Without --paired (results of an older ringd): the fastest round's mean over its best.
    runs = [replay("fused", 1, [(330, 0), (330, 0)], 300, paired=False),
            replay("fused", 2, [(320, 0)], 310, paired=False)]
    text = report(out, runs, meta)
    expect(text, ["| fused step (compute 0) / one-buffer allreduce | 1.032 | <= 1.10 | yes |"],
           absent=["paired"])

    # Over local devices: the hierarchical target (1.15) and the bytes on the wire against the line.
    # 2 x 3/4 x 100 MiB per 140 ms = 1.123 GB/s... against a 1.0 GB/s line.
    runs = [replay("fused", 1, [(140, 120), (150, 120), (130, 120)], 120, devices=4)]
    text = report(out, runs, meta)
    expect(text, [
        "| fused step (compute 0) / one-buffer hierarchical allreduce, paired: median of 3 steps "
        "| 1.167 | <= 1.15 | NO |",
        "| per-node bytes on the wire / line (fused) | 1.123 | >= 0.90 | yes |",
    ])
    print("report_fusion_test: ok")


if __name__ == "__main__":
    REPO = sys.argv[1]
    main()
