#!/usr/bin/env python3
"""Table and verdicts of bench/compare_fusion.sh from its runs.jsonl (one `ringd bench replay
--json` object per run, tagged with "run" and "round").

For each run name the round with the fastest mean step is kept (the machine's speed drifts; the
rounds are interleaved so a drift hits every run). The verdicts are issue 5's acceptance lines:
  fused communication >= 3x faster than tensor by tensor   unfused / fused step (compute 0)
  overlapped step <= 1.15 x ideal                          its own round's ideal
  negotiation <= 2% of the overlapped step once cached     negotiation_share of that run
"""
import argparse
import json
import sys

from report_lib import provenance_line, verdict_lines

RUNS = ["unfused", "fused", "uncached", "overlapped"]
TARGETS = {"speedup": 3.0, "step_over_ideal": 1.15, "negotiation_share": 0.02}


def load(path):
    best = {}
    with open(path) as lines:
        for line in lines:
            line = line.strip()
            if not line:
                continue
            run = json.loads(line)
            name = run["run"]
            if name not in best or run["mean_step_ms"] < best[name]["mean_step_ms"]:
                best[name] = run
    return best


def verdicts(best):
    """[(line, measured, target, ok)] for the lines whose runs are present."""
    out = []
    if "unfused" in best and "fused" in best:
        speedup = best["unfused"]["mean_step_ms"] / best["fused"]["mean_step_ms"]
        out.append(("fused communication vs tensor by tensor (x faster)", speedup,
                    ">= %.2f" % TARGETS["speedup"], speedup >= TARGETS["speedup"]))
    if "overlapped" in best:
        run = best["overlapped"]
        ratio = run["mean_step_ms"] / run["ideal_ms"] if run["ideal_ms"] > 0 else float("inf")
        out.append(("overlapped step / ideal", ratio, "<= %.2f" % TARGETS["step_over_ideal"],
                    ratio <= TARGETS["step_over_ideal"]))
        share = run["negotiation_share"]
        out.append(("negotiation share of the overlapped step (cached)", share,
                    "<= %.2f" % TARGETS["negotiation_share"],
                    share <= TARGETS["negotiation_share"]))
    return out


def table(best, meta):
    rows = ["| run | compute (ms) | step (ms) | tail (ms) | negotiation (ms) | share | "
            "buckets/step | coordinator rounds/step | ideal (ms) | step/ideal | wrong |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in RUNS:
        if name not in best:
            continue
        run = best[name]
        steps = run.get("steps", [])
        per_step = lambda key: sum(s[key] for s in steps) / len(steps) if steps else 0
        ideal = run["ideal_ms"]
        rows.append("| %s | %.1f | %.2f | %.2f | %.3f | %.2f%% | %.1f | %.1f | %.2f | %.3f | %d |" % (
            name, run["compute_ms"], run["mean_step_ms"], per_step("tail_ms"),
            run["negotiation_ms"], 100 * run["negotiation_share"], per_step("buckets"),
            per_step("coordinator_rounds"), ideal,
            run["mean_step_ms"] / ideal if ideal > 0 else 0, run["wrong"]))
    first = next(iter(best.values()))
    head = ("%s, %d tensors, %.1f MiB per step; %s nodes at %s; %d ranks over %s; one-buffer "
            "allreduce of all the bytes %.2f ms (fused run)" % (
                first["profile"], first["tensors"], first["bytes"] / 2**20, meta.get("nodes"),
                meta.get("rate"), first["ranks"], first["transport"],
                best.get("fused", first)["one_buffer_ms"]))
    lines = [head, ""] + rows + [""]
    lines += verdict_lines(verdicts(best)) + ["", provenance_line(meta)]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", required=True)
    parser.add_argument("--meta", required=True)
    parser.add_argument("--table")
    args = parser.parse_args()
    best = load(args.runs)
    if not best:
        sys.exit("report_fusion: no runs in %s" % args.runs)
    text = table(best, json.load(open(args.meta)))
    print(text)
    if args.table:
        with open(args.table, "w") as out:
            out.write(text)


if __name__ == "__main__":
    main()
