#!/usr/bin/env python3
"""Table, plots and verdicts of bench/compare_training.sh from its runs.jsonl (one
`ringd train --json` summary per run, tagged with rate, workload, system, nodes, servers).

Scaling efficiency of a run = its samples/s / (nodes x samples/s of the one-node allreduce run of
the same workload and rate), which has no communication at all. The verdicts are issue 6's
benchmark lines:
  vgg16 replay, 4 nodes at 1 Gbit/s: allreduce >= 2.5 x ps1 samples/s, >= 1.0 x ps-colo
  resnet50 replay at 10 Gbit/s: allreduce scaling efficiency >= 0.9 at 4 and 8 nodes
"""
import argparse
import json
import os
import sys

from report_lib import provenance_line, verdict_lines

SYSTEMS = ["allreduce", "ps1", "psk", "ps-colo"]


def load(path):
    runs = {}
    with open(path) as lines:
        for line in lines:
            if line.strip():
                run = json.loads(line)
                runs[(run["rate"], run["workload"], run["system"], run["nodes"])] = run
    return runs


def efficiency(runs, run):
    base = runs.get((run["rate"], run["workload"], "allreduce", 1))
    if not base or not base["samples_per_second"]:
        return None
    return run["samples_per_second"] / (run["nodes"] * base["samples_per_second"])


def time_to_accuracy(run, target):
    """Seconds of training until the first epoch whose test accuracy reaches target (linear in
    steps within the run), or None."""
    steps = run.get("steps") or 0
    for epoch in run.get("epochs", []):
        accuracy = epoch.get("test_accuracy")
        if accuracy is not None and accuracy >= target and steps:
            done = epoch["step"] - run.get("start_step", 0)
            return run["train_seconds"] * done / steps
    return None


def verdicts(runs):
    out = []
    ar = runs.get(("1gbit", "vgg16", "allreduce", 4))
    for system, target in (("ps1", 2.5), ("ps-colo", 1.0)):
        other = runs.get(("1gbit", "vgg16", system, 4))
        if ar and other and other["samples_per_second"]:
            ratio = ar["samples_per_second"] / other["samples_per_second"]
            out.append(("vgg16, 4 nodes, 1 Gbit/s: allreduce / %s samples/s" % system, ratio,
                        ">= %.1f" % target, ratio >= target))
    for nodes in (4, 8):
        run = runs.get(("10gbit", "resnet50", "allreduce", nodes))
        eff = efficiency(runs, run) if run else None
        if eff is not None:
            out.append(("resnet50, 10 Gbit/s: allreduce scaling efficiency at %d nodes" % nodes,
                        eff, ">= 0.9", eff >= 0.9))
    return out


def table(runs, meta, target):
    lines = ["| rate | workload | system | nodes | servers | samples/s | scaling eff. | "
             "comm share | step (ms) | time to %.2f acc. (s) | final test acc. |" % target,
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    order = lambda key: (key[0], key[1], key[3], SYSTEMS.index(key[2]))
    for key in sorted(runs, key=order):
        run = runs[key]
        eff = efficiency(runs, run)
        tta = time_to_accuracy(run, target) if run["workload"] == "mlp" else None
        step_ms = 1e3 * run["train_seconds"] / run["steps"] if run.get("steps") else 0
        acc = run.get("test_accuracy")
        lines.append("| %s | %s | %s | %d | %d | %.1f | %s | %.2f | %.1f | %s | %s |" % (
            run["rate"], run["workload"], run["system"], run["nodes"], run["servers"],
            run["samples_per_second"], "%.3f" % eff if eff is not None else "-",
            run.get("comm_share", 0), step_ms, "%.1f" % tta if tta is not None else "-",
            "%.4f" % acc if acc is not None else "-"))
    lines += [""] + verdict_lines(verdicts(runs)) + ["", provenance_line(meta)]
    return "\n".join(lines) + "\n"


def plot(runs, png_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report_training: no matplotlib, no PNG", file=sys.stderr)
        return
    for rate, workload in sorted({(k[0], k[1]) for k in runs}):
        fig, ax = plt.subplots(figsize=(6, 4))
        base = runs.get((rate, workload, "allreduce", 1))
        for system in SYSTEMS:
            points = sorted((k[3], r["samples_per_second"]) for k, r in runs.items()
                            if k[0] == rate and k[1] == workload and k[2] == system)
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=system)
        if base:
            nodes = sorted({k[3] for k in runs if k[0] == rate and k[1] == workload})
            ax.plot(nodes, [n * base["samples_per_second"] for n in nodes], linestyle=":",
                    color="grey", label="linear (1-node allreduce x N)")
        ax.set_xlabel("worker nodes")
        ax.set_ylabel("samples/s")
        ax.set_title("%s at %s" % (workload, rate))
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(png_dir, "training_%s_%s.png" % (workload, rate)), dpi=100)
        plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", required=True)
    parser.add_argument("--meta", required=True)
    parser.add_argument("--table")
    parser.add_argument("--png-dir")
    parser.add_argument("--target-accuracy", type=float, default=0.85)
    args = parser.parse_args()
    runs = load(args.runs) if os.path.exists(args.runs) else {}
    if not runs:
        sys.exit("report_training: no runs in %s" % args.runs)
    text = table(runs, json.load(open(args.meta)), args.target_accuracy)
    print(text)
    if args.table:
        with open(args.table, "w") as out:
            out.write(text)
    if args.png_dir:
        plot(runs, args.png_dir)


if __name__ == "__main__":
    main()
