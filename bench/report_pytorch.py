#!/usr/bin/env python3
"""Tables and verdicts of bench/compare_pytorch.sh from DIR/runs.jsonl.

The verdicts are issue 14's acceptance lines (synthetic benchmark, img/s per rank):
  10 Gbit/s: ringd.torch >= 1.3x the best of Horovod and DDP
  1 Gbit/s:  ringd.torch >= 1.5x Horovod (MPI ops) and >= 1.0x DDP
  one rank:  ringd.torch at most 5% slower than plain PyTorch
plus the CNN's test accuracy after its epochs on the emulated nodes (>= 0.90 is issue 14's line
for the example's full run, which the benchmark's short runs need not reach).
"""
import argparse
import os

from report_lib import read_jsonl, write_report

FRAMEWORK_NAMES = {"ringd": "ringd.torch", "horovod": "Horovod 0.28.1 (MPI)",
                   "ddp": "PyTorch DDP (gloo)", "none": "plain PyTorch"}



def rate_order(rate):
    digits = "".join(c for c in rate if c.isdigit()) or "0"
    return (rate.endswith("gbit"), int(digits))


def synthetic_section(runs, verdicts):
    runs = [r for r in runs if r["part"] == "synthetic"]
    if not runs:
        return []
    by = {(r["rate"], r["framework"]): r for r in runs}
    lines = ["## Synthetic benchmark (%s, %g ms modeled compute, %d ranks)" % (
        runs[0]["profile"], runs[0]["compute_ms"], runs[0]["ranks"]), "",
        "| rate | framework | img/s per rank | 95% interval | vs ringd.torch |",
        "|---|---|---:|---:|---:|"]
    for rate in sorted({r["rate"] for r in runs}, key=rate_order):
        ringd = by.get((rate, "ringd"))
        for framework in ("ringd", "horovod", "ddp"):
            run = by.get((rate, framework))
            if not run:
                continue
            relative = (ringd["img_per_s_per_rank"] / run["img_per_s_per_rank"]) if ringd else 0
            lines.append("| %s | %s | %.1f | +-%.1f | %s |" % (
                rate, FRAMEWORK_NAMES[framework], run["img_per_s_per_rank"], run["interval"],
                "%.2fx" % relative if ringd and framework != "ringd" else "-"))
        if not ringd:
            continue
        mine = ringd["img_per_s_per_rank"]
        horovod = by.get((rate, "horovod"))
        ddp = by.get((rate, "ddp"))
        if rate == "10gbit":
            peers = [p["img_per_s_per_rank"] for p in (horovod, ddp) if p]
            if peers:
                verdicts.append(("10 Gbit/s: ringd.torch / best of Horovod and DDP", mine / max(peers),
                                 ">= 1.3", mine / max(peers) >= 1.3))
        if rate == "1gbit":
            if horovod:
                ratio = mine / horovod["img_per_s_per_rank"]
                verdicts.append(("1 Gbit/s: ringd.torch / Horovod", ratio, ">= 1.5", ratio >= 1.5))
            if ddp:
                ratio = mine / ddp["img_per_s_per_rank"]
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


def plot(runs, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    runs = [r for r in runs if r["part"] == "synthetic"]
    if not runs:
        return False
    rates = sorted({r["rate"] for r in runs}, key=rate_order)
    frameworks = [f for f in ("ringd", "horovod", "ddp") if any(r["framework"] == f for r in runs)]
    by = {(r["rate"], r["framework"]): r for r in runs}
    figure, axes = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(frameworks)
    for i, framework in enumerate(frameworks):
        xs = [j + i * width for j in range(len(rates))]
        ys = [by[(rate, framework)]["img_per_s_per_rank"] if (rate, framework) in by else 0
              for rate in rates]
        errors = [by[(rate, framework)]["interval"] if (rate, framework) in by else 0
                  for rate in rates]
        axes.bar(xs, ys, width, yerr=errors, label=FRAMEWORK_NAMES[framework])
    axes.set_xticks([j + width * (len(frameworks) - 1) / 2 for j in range(len(rates))])
    axes.set_xticklabels(rates)
    axes.set_ylabel("img/s per rank")
    axes.set_title("%s, %d emulated nodes" % (runs[0]["profile"], runs[0]["ranks"]))
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="compare_pytorch.sh's result directory")
    parser.add_argument("--meta", required=True)
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args()
    runs = read_jsonl(os.path.join(args.out, "runs.jsonl"))
    verdicts = []
    lines = synthetic_section(runs, verdicts) + single_section(runs, verdicts) + cnn_section(runs)
    if not args.no_plot and plot(runs, os.path.join(args.out, "pytorch.png")):
        lines.append("plot: pytorch.png")
        lines.append("")
    write_report(args.out, lines, verdicts, args.meta)


if __name__ == "__main__":
    main()
