#!/usr/bin/env python3
"""Tables and verdicts of bench/compare_tensorflow.sh from DIR/runs.jsonl.

The verdicts are issue 38's acceptance lines (synthetic benchmark, img/s per rank):
  10 Gbit/s: ringd >= 1.3x MultiWorkerMirroredStrategy
  1 Gbit/s:  ringd >= 2x the best parameter-server layout (1 or 2 parameter servers)
  one rank:  ringd at most 5% slower than plain TensorFlow
plus the Keras CNN's test accuracy after its epochs on the emulated nodes (>= 0.90 is the
example's full run's line, which the benchmark's short runs need not reach).

The synthetic benchmark may run in several rounds (each run's "round"): every framework's figure
is the median of its rounds, and the verdicts compare those medians.
"""
import argparse
import os
import statistics

from report_lib import plot_synthetic, rate_order, read_jsonl, synthetic_medians, write_report

FRAMEWORK_NAMES = {"ringd": "ringd.tensorflow / ringd.keras",
                   "mwms": "MultiWorkerMirroredStrategy (ring)",
                   "ps1": "ParameterServerStrategy, 1 PS", "ps2": "ParameterServerStrategy, 2 PS",
                   "horovod": "Horovod 0.28.1 (TF 2.15.1, MPI)", "none": "plain TensorFlow"}
FRAMEWORK_ORDER = ("ringd", "mwms", "ps1", "ps2", "horovod")



def synthetic_section(runs, verdicts):
    runs = [r for r in runs if r["part"] == "synthetic"]
    if not runs:
        return []
    medians = synthetic_medians(runs)
    lines = ["## Synthetic benchmark (%s, %g ms modeled compute, %d ranks)" % (
        runs[0]["profile"], runs[0]["compute_ms"], runs[0]["ranks"]), "",
        "img/s per rank: the median of the rounds; each round's figure is the mean over its "
        "iterations (95% interval: the median of the rounds' intervals).", "",
        "| rate | framework | img/s per rank | rounds | 95% interval | ringd / it |",
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
        mwms = medians.get((rate, "mwms"))
        servers = [medians[(rate, f)][0] for f in ("ps1", "ps2") if (rate, f) in medians]
        if rate == "10gbit" and mwms:
            ratio = mine / mwms[0]
            verdicts.append(("10 Gbit/s: ringd / MultiWorkerMirroredStrategy", ratio, ">= 1.3",
                             ratio >= 1.3))
        if rate == "1gbit" and servers:
            ratio = mine / max(servers)
            verdicts.append(("1 Gbit/s: ringd / best parameter-server layout", ratio, ">= 2",
                             ratio >= 2))
    return lines + [""]


def single_section(runs, verdicts):
    """One process: the medians of plain TensorFlow's and ringd's rounds."""
    rounds = {}
    for run in runs:
        if run["part"] == "single":
            rounds.setdefault(run["framework"], []).append(run)
    if "none" not in rounds or "ringd" not in rounds:
        return []
    plain = statistics.median(r["img_per_s_per_rank"] for r in rounds["none"])
    mine = statistics.median(r["img_per_s_per_rank"] for r in rounds["ringd"])
    slower = (plain - mine) / plain * 100
    verdicts.append(("one rank: ringd slower than plain TensorFlow (%)", slower, "<= 5",
                     slower <= 5))

    def each(framework):
        return ", ".join("%.1f" % r["img_per_s_per_rank"]
                         for r in sorted(rounds[framework], key=lambda r: r.get("round", 1)))

    return ["## One process", "", "img/s: the median of the rounds (interleaved).", "",
            "| framework | img/s | rounds |", "|---|---:|---|",
            "| plain TensorFlow | %.1f | %s |" % (plain, each("none")),
            "| ringd.tensorflow (a world of one) | %.1f | %s |" % (mine, each("ringd")), ""]


def cnn_section(runs):
    runs = [r for r in runs if r["part"] == "cnn"]
    if not runs:
        return []
    lines = ["## Fashion-MNIST CNN, Keras model.fit (%d ranks)" % runs[0]["ranks"], "",
             "| rate | framework | epochs | test accuracy | s per epoch (with evaluation) | "
             "samples/s |",
             "|---|---|---:|---:|---:|---:|"]
    for run in sorted(runs, key=lambda r: (rate_order(r["rate"]), r["framework"])):
        epochs = run["epochs"]
        last = epochs[-1]
        lines.append("| %s | %s | %d | %.4f | %.1f | %.0f |" % (
            run["rate"], FRAMEWORK_NAMES[run["framework"]], len(epochs), last["test_accuracy"],
            sum(e["epoch_s"] for e in epochs) / len(epochs),
            sum(e["samples_per_s"] for e in epochs) / len(epochs)))
    return lines + [""]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True,
                        help="compare_tensorflow.sh's result directory")
    parser.add_argument("--meta", required=True)
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args()
    runs = read_jsonl(os.path.join(args.out, "runs.jsonl"))
    verdicts = []
    lines = synthetic_section(runs, verdicts) + single_section(runs, verdicts) + cnn_section(runs)
    if not args.no_plot and plot_synthetic(runs, os.path.join(args.out, "tensorflow.png"),
                                                     FRAMEWORK_NAMES, FRAMEWORK_ORDER):
        lines.append("plot: tensorflow.png")
        lines.append("")
    write_report(args.out, lines, verdicts, args.meta)


if __name__ == "__main__":
    main()
