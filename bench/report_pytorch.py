#!/usr/bin/env python3
"""Tables and verdicts of bench/compare_pytorch.sh from DIR/runs.jsonl.

The verdicts are issue 14's acceptance lines (synthetic benchmark, img/s per rank):
  10 Gbit/s: ringd.torch >= 1.3x the best of Horovod and DDP
  1 Gbit/s:  ringd.torch >= 1.5x Horovod (MPI ops) and >= 1.0x DDP
  one rank:  ringd.torch at most 5% slower than plain PyTorch
plus the CNN's test accuracy after its epochs on the emulated nodes (>= 0.90 is issue 14's line
for the example's full run, which the benchmark's short runs need not reach).

The synthetic benchmark may run in several rounds (each run's "round"): every framework's figure
is the median of its rounds, and the verdicts compare those medians.
"""
import argparse
import os

from report_lib import plot_synthetic, rate_order, read_jsonl, synthetic_medians, write_report

FRAMEWORK_NAMES = {"ringd": "ringd.torch", "horovod": "Horovod 0.28.1 (MPI)",
                   "ddp": "PyTorch DDP (gloo)", "ddp-ringd": "PyTorch DDP (ringd backend)",
                   "none": "plain PyTorch"}
# The order of the table's rows and the plot's bars; ddp-ringd (DDP on ringd's torch.distributed
# backend) is ringd's, not a peer: no verdict compares with it.
FRAMEWORK_ORDER = ("ringd", "ddp-ringd", "horovod", "ddp")



def synthetic_section(runs, verdicts):
    runs = [r for r in runs if r["part"] == "synthetic"]
    if not runs:
        return []
    medians = synthetic_medians(runs)
    lines = ["## Synthetic benchmark (%s, %g ms modeled compute, %d ranks)" % (
        runs[0]["profile"], runs[0]["compute_ms"], runs[0]["ranks"]), "",
        "img/s per rank: the median of the rounds; each round's figure is the mean over its "
        "iterations (95% interval: the median of the rounds' intervals).", "",
        "| rate | framework | img/s per rank | rounds | 95% interval | vs ringd.torch |",
        "|---|---|---:|---|---:|---:|"]
    for rate in sorted({r["rate"] for r in runs}, key=rate_order):
        ringd = medians.get((rate, "ringd"))
        for framework in FRAMEWORK_ORDER:
            if (rate, framework) not in medians:
                continue
            median, each, interval = medians[(rate, framework)]
            lines.append("| %s | %s | %.1f | %s | +-%.1f | %s |" % (
                rate, FRAMEWORK_NAMES[framework], median, ", ".join("%.1f" % x for x in each),
                interval, "%.2fx" % (ringd[0] / median) if ringd and framework != "ringd" else "-"))
        if not ringd:
            continue
        mine = ringd[0]
        horovod = medians.get((rate, "horovod"))
        ddp = medians.get((rate, "ddp"))
        if rate == "10gbit":
            peers = [p[0] for p in (horovod, ddp) if p]
            if peers:
                verdicts.append(("10 Gbit/s: ringd.torch / best of Horovod and DDP", mine / max(peers),
                                 ">= 1.3", mine / max(peers) >= 1.3))
        if rate == "1gbit":
            if horovod:
                ratio = mine / horovod[0]
                verdicts.append(("1 Gbit/s: ringd.torch / Horovod", ratio, ">= 1.5", ratio >= 1.5))
            if ddp:
                ratio = mine / ddp[0]
                verdicts.append(("1 Gbit/s: ringd.torch / DDP", ratio, ">= 1.0", ratio >= 1.0))
    return lines + [""]


def single_section(runs, verdicts):
    by = {r["framework"]: r for r in runs if r["part"] == "single"}
    if "none" not in by or "ringd" not in by:
        return []
    plain = by["none"]["img_per_s_per_rank"]
    mine = by["ringd"]["img_per_s_per_rank"]
    slower = (plain - mine) / plain * 100
    verdicts.append(("one rank: ringd.torch slower than plain PyTorch (%)", slower, "<= 5",
                     slower <= 5))
    return ["## One process", "", "| framework | img/s | +- |", "|---|---:|---:|",
            "| plain PyTorch | %.1f | %.1f |" % (plain, by["none"]["interval"]),
            "| ringd.torch (a world of one) | %.1f | %.1f |" % (mine, by["ringd"]["interval"]), ""]


def cnn_section(runs):
    runs = [r for r in runs if r["part"] == "cnn"]
    if not runs:
        return []
    lines = ["## Fashion-MNIST CNN (%d ranks)" % runs[0]["ranks"], "",
             "| rate | framework | epochs | test accuracy | train s per epoch | samples/s |",
             "|---|---|---:|---:|---:|---:|"]
    for run in sorted(runs, key=lambda r: (rate_order(r["rate"]), r["framework"])):
        epochs = run["epochs"]
        last = epochs[-1]
        lines.append("| %s | %s | %d | %.4f | %.1f | %.0f |" % (
            run["rate"], FRAMEWORK_NAMES[run["framework"]], len(epochs), last["test_accuracy"],
            sum(e["train_s"] for e in epochs) / len(epochs),
            sum(e["samples_per_s"] for e in epochs) / len(epochs)))
    return lines + [""]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="compare_pytorch.sh's result directory")
    parser.add_argument("--meta", required=True)
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args()
    runs = read_jsonl(os.path.join(args.out, "runs.jsonl"))
    verdicts = []
    lines = synthetic_section(runs, verdicts) + single_section(runs, verdicts) + cnn_section(runs)
    if not args.no_plot and plot_synthetic(runs, os.path.join(args.out, "pytorch.png"),
                                                     FRAMEWORK_NAMES, FRAMEWORK_ORDER):
        lines.append("plot: pytorch.png")
        lines.append("")
    write_report(args.out, lines, verdicts, args.meta)


if __name__ == "__main__":
    main()
