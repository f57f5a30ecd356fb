#!/usr/bin/env python3
"""Tables and verdicts of bench/compare_dgc.sh from DIR/runs.jsonl (replays), DIR/accuracy.jsonl
(MLP training runs), DIR/cnn.jsonl (the PyTorch CNN's) and DIR/kernel.json (google-benchmark),
whichever exist.

The verdicts are issue 16's acceptance lines:
  communication per step >= 10x faster with DGC   dense step / dgc step, --compute-ms 0
  scaling efficiency >= 0.9 at 8 nodes            resnet50 with DGC and --compute-ms C
  DGC test accuracy within 0.5 points of dense    mean over the seeds (MLP; PyTorch CNN)
  selection + packing <= 10 ms per 25 M floats    the kernel benchmark at 99.9%
"""
import argparse
import json
import os
import statistics

from report_lib import read_jsonl, write_report

TARGETS = {"speedup": 10.0, "efficiency": 0.9, "accuracy_points": 0.5, "select_ms": 10.0}
MODELS = {  # model -> (section title, name in the verdict, plot file)
    "mlp": ("Accuracy: the MLP (ringd train)", "MLP", "accuracy.png"),
    "cnn": ("Accuracy: the PyTorch CNN (ringd.torch)", "PyTorch CNN", "accuracy_cnn.png"),
}


def speed_section(runs, verdicts):
    if not runs:
        return []
    by_key = {(r["run"], r["profile"], r["ranks"]): r for r in runs}
    rows = ["| profile | nodes | dense step (ms) | dgc step (ms) | dgc x faster | sent per rank, "
            "dense (MiB) | sent per rank, dgc (MiB) | bytes ratio | dgc tensors sparse | "
            "wrong |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (name, profile, ranks), dgc in sorted(by_key.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        if name != "dgc" or ("dense", profile, ranks) not in by_key:
            continue
        dense = by_key[("dense", profile, ranks)]
        speedup = dense["mean_step_ms"] / dgc["mean_step_ms"]
        dense_sent = dense["bytes"]
        dgc_sent = dgc.get("compressed_bytes_per_step", 0) or float("nan")
        rows.append("| %s | %d | %.1f | %.1f | %.1f | %.1f | %.3f | %.0f | %.0f of %d | %d/%d |" % (
            profile, ranks, dense["mean_step_ms"], dgc["mean_step_ms"], speedup,
            dense_sent / 2**20, dgc_sent / 2**20, dense_sent / dgc_sent,
            dgc.get("sparse_tensors_per_step", 0), dgc["tensors"], dense["wrong"], dgc["wrong"]))
        verdicts.append(("%s, %d nodes: communication per step, dgc vs dense (x faster)" % (
            profile, ranks), speedup, ">= %.0f" % TARGETS["speedup"],
            speedup >= TARGETS["speedup"]))
    rows.append("")
    rows.append("| profile | nodes | compute (ms) | dense step (ms) | dense efficiency | "
                "dgc step (ms) | dgc efficiency |")
    rows.append("|---|---:|---:|---:|---:|---:|---:|")
    for (name, profile, ranks), dgc in sorted(by_key.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        if name != "dgc-compute" or ("dense-compute", profile, ranks) not in by_key:
            continue
        dense = by_key[("dense-compute", profile, ranks)]
        rows.append("| %s | %d | %.0f | %.1f | %.2f | %.1f | %.2f |" % (
            profile, ranks, dgc["compute_ms"], dense["mean_step_ms"], dense["scaling_efficiency"],
            dgc["mean_step_ms"], dgc["scaling_efficiency"]))
        if ranks >= 8:
            verdicts.append(("%s, %d nodes, compute %.0f ms: dgc scaling efficiency" % (
                profile, ranks, dgc["compute_ms"]), dgc["scaling_efficiency"],
                ">= %.2f" % TARGETS["efficiency"],
                dgc["scaling_efficiency"] >= TARGETS["efficiency"]))
    return ["## Speed (emulated cluster)", ""] + rows + [""]


def accuracy_section(runs, verdicts, out_dir, plot, model="mlp"):
    if not runs:
        return []
    title, label, plot_file = MODELS[model]
    modes = {}
    for run in runs:
        modes.setdefault(run["mode"], []).append(run)
    rows = ["| mode | lr schedule | seeds | final test accuracy: mean | spread (min..max) | runs |",
            "|---|---|---:|---:|---|---|"]
    means = {}
    for mode, items in sorted(modes.items()):
        finals = [r["test_accuracy"] for r in items]
        means[mode] = statistics.mean(finals)
        schedules = "/".join(sorted({r.get("lr_schedule", "constant") for r in items}))
        rows.append("| %s | %s | %d | %.4f | %.4f..%.4f | %s |" % (
            mode, schedules, len(items), means[mode], min(finals), max(finals),
            ", ".join("%.4f" % f for f in finals)))
    if "none" in means and "dgc-0.999" in means:
        gap = 100 * (means["none"] - means["dgc-0.999"])
        verdicts.append(("%s test accuracy, dense minus dgc 99.9%% (points)" % label, gap,
                         "<= %.1f" % TARGETS["accuracy_points"],
                         gap <= TARGETS["accuracy_points"]))
    if plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            figure, axes = plt.subplots(figsize=(7, 4))
            colors = {}
            for run in runs:
                epochs = [e["epoch"] for e in run["epochs"]]
                accuracy = [e["test_accuracy"] for e in run["epochs"]]
                color = colors.setdefault(run["mode"], "C%d" % len(colors))
                axes.plot(epochs, accuracy, color=color, alpha=0.7,
                          label="%s seed %d" % (run["mode"], run["seed"]))
            axes.set_xlabel("epoch")
            axes.set_ylabel("test accuracy")
            axes.set_title("%s on Fashion-MNIST, 4 ranks: dense vs DGC" % label)
            axes.legend(fontsize=7)
            figure.tight_layout()
            figure.savefig(os.path.join(out_dir, plot_file), dpi=120)
            rows += ["", "curves: " + plot_file]
        except ImportError:
            rows += ["", "(no matplotlib: no %s)" % plot_file]
    return ["## " + title, ""] + rows + [""]


def kernel_section(path, verdicts):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        report = json.load(f)
    rows = ["| benchmark | time per call (ms) |", "|---|---:|"]
    for bench in report.get("benchmarks", []):
        if bench.get("run_type") == "aggregate" and bench.get("aggregate_name") != "median":
            continue
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[bench.get("time_unit", "ns")]
        ms = bench["real_time"] * scale
        rows.append("| %s | %.2f |" % (bench["name"], ms))
        name = bench["name"]
        if name.startswith("BM_SelectAndPack/999/500"):  # 99.9%, the default 0.05% sample
            verdicts.append(("%s (ms)" % name, ms, "<= %.0f" % TARGETS["select_ms"],
                             ms <= TARGETS["select_ms"]))
    return ["## Selection kernel", ""] + rows + [""]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="compare_dgc.sh's result directory")
    parser.add_argument("--meta", required=True)
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args()
    verdicts = []
    lines = []
    lines += speed_section(read_jsonl(os.path.join(args.out, "runs.jsonl")), verdicts)
    lines += accuracy_section(read_jsonl(os.path.join(args.out, "accuracy.jsonl")), verdicts,
                              args.out, not args.no_plot)
    lines += accuracy_section(read_jsonl(os.path.join(args.out, "cnn.jsonl")), verdicts,
                              args.out, not args.no_plot, model="cnn")
    lines += kernel_section(os.path.join(args.out, "kernel.json"), verdicts)
    write_report(args.out, lines, verdicts, args.meta)


if __name__ == "__main__":
    main()
