#!/usr/bin/env python3
"""Table, verdict and plot of one compare_hierarchy.sh run (N nodes x L devices against N x L
processes in one flat ring).

    bench/plot_hierarchy.py --dir DIR --nodes N --devices L [--rate 1gbit] [--line-GBps 0.119]
                            [--table DIR/table.md] [--png DIR/hierarchy_nodebw.png]

Reads DIR/reduce-bcast.jsonl, DIR/rs-ag.jsonl and DIR/flat.jsonl (the keys of `ringd bench
--json`; several rounds per size, each size keeps its fastest) and DIR/line.json (iperf3).
Per-node busbw ("nodebw") is algbw x 2(N-1)/N for every system: what each node's link would carry
each way in a ring of N nodes, the figure to hold against the line rate. (The flat ring of N x L
ranks really moves 2(NL-1)/NL of the buffer over each node's link, more than that: which is part
of what the hierarchy saves.) Ratios: flat time / hierarchical time (> 1: the hierarchy is
faster), and the best hierarchical nodebw / line. Below the table, the issue's acceptance lines:
nodebw >= 0.9 x line at >= 16 MB, and >= 2x faster than the flat ring at <= 256 KB.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_allreduce import load_system, rate_GBps, size_text, time_text  # noqa: E402

SYSTEMS = [("reduce-bcast", "hierarchical reduce-bcast"), ("rs-ag", "hierarchical rs-ag"),
           ("flat", "flat ring")]
HIERARCHICAL = ["reduce-bcast", "rs-ag"]


def nodebw(row, nodes):
    return row["algbw_GBps"] * 2.0 * (nodes - 1) / nodes


def load(directory):
    systems = {}
    for name, _ in SYSTEMS:
        path = os.path.join(directory, name + ".jsonl")
        if os.path.exists(path):
            rows = load_system(path)
            if rows:
                systems[name] = rows
    return systems


def table(systems, nodes, devices, line):
    labels = dict(SYSTEMS)
    sizes = sorted({s for rows in systems.values() for s in rows})
    header = ["size"]
    for name in systems:
        what = "%d x %d" % (nodes, devices) if name != "flat" else "%d processes" % (nodes * devices)
        header.append("%s, %s: time (nodebw GB/s)" % (labels[name], what))
    if "flat" in systems:
        header += ["flat / %s time" % n for n in HIERARCHICAL if n in systems]
    if line:
        header.append("best hierarchical nodebw / line")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for size in sizes:
        cells = [size_text(size)]
        for name in systems:
            row = systems[name].get(size)
            cells.append("%s (%.3f)" % (time_text(row["time_us"]), nodebw(row, nodes))
                         if row else "–")
        flat = systems.get("flat", {}).get(size)
        if "flat" in systems:
            for name in HIERARCHICAL:
                if name in systems:
                    row = systems[name].get(size)
                    cells.append("%.2f" % (flat["time_us"] / row["time_us"]) if row and flat else "–")
        if line:
            best = [nodebw(systems[n][size], nodes) for n in HIERARCHICAL
                    if n in systems and size in systems[n]]
            cells.append("%.2f" % (max(best) / line) if best else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def verdict(systems, nodes, line):
    """The issue's two acceptance lines, per hierarchical strategy."""
    out = []
    flat = systems.get("flat", {})
    for name in HIERARCHICAL:
        rows = systems.get(name)
        if not rows:
            continue
        if line:
            big = [(s, nodebw(r, nodes) / line) for s, r in sorted(rows.items()) if s >= 16 << 20]
            if big:
                ok = all(ratio >= 0.9 for _, ratio in big)
                out.append("- %s, >= 16 MB, nodebw >= 0.9 x line (%.3f GB/s): %s (%s)" % (
                    name, line, "met" if ok else "NOT met",
                    ", ".join("%s %.2f" % (size_text(s), r) for s, r in big)))
        small = [(s, flat[s]["time_us"] / r["time_us"]) for s, r in sorted(rows.items())
                 if s <= 256 << 10 and s in flat]
        if small:
            ok = all(ratio >= 2.0 for _, ratio in small)
            out.append("- %s, <= 256 KB, >= 2x faster than the flat ring: %s (%s)" % (
                name, "met" if ok else "NOT met",
                ", ".join("%s %.2fx" % (size_text(s), r) for s, r in small)))
    return "\n".join(out) + "\n" if out else ""


def plot(systems, png, nodes, devices, rate, line, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = dict(SYSTEMS)
    fig, ax = plt.subplots(figsize=(7.0, 4.2), dpi=100)
    for marker, (name, rows) in zip("osD", systems.items()):
        sizes = sorted(rows)
        what = "%d x %d" % (nodes, devices) if name != "flat" else "%d processes" % (nodes * devices)
        ax.plot(sizes, [nodebw(rows[s], nodes) for s in sizes], marker=marker, markersize=4,
                linewidth=1.5, label="%s (%s)" % (labels[name], what))
    if rate:
        ax.axhline(rate_GBps(rate), color="grey", linestyle=":", linewidth=1,
                   label="tc rate %s (%.3f GB/s)" % (rate, rate_GBps(rate)))
    if line:
        ax.axhline(line, color="black", linestyle="--", linewidth=1,
                   label="one TCP stream (%.3f GB/s)" % line)
        ax.axhline(0.9 * line, color="black", linestyle=":", linewidth=0.8, label="0.9 x line")
    sizes = sorted({s for rows in systems.values() for s in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([size_text(s) for s in sizes])
    ax.set_yscale("log")
    ax.set_xlabel("allreduce size (float32 sum)")
    ax.set_ylabel("per-node busbw: algbw x 2(N-1)/N (GB/s)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
    try:  # a 64-colour palette keeps the PNG small enough to commit
        from PIL import Image

        with Image.open(png) as image:
            small = image.convert("RGB").quantize(colors=64)
        small.save(png, optimize=True)
    except ImportError:
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--devices", type=int, required=True)
    parser.add_argument("--rate", default="")
    parser.add_argument("--line-GBps", type=float, default=None)
    parser.add_argument("--table", default=None)
    parser.add_argument("--png", default=None)
    args = parser.parse_args()

    systems = load(args.dir)
    if not systems:
        sys.exit("plot_hierarchy: no results in %s" % args.dir)
    line = args.line_GBps
    line_path = os.path.join(args.dir, "line.json")
    if line is None and os.path.exists(line_path):
        line = json.load(open(line_path))["end"]["sum_received"]["bits_per_second"] / 8e9
    wrong = sum(max(0, r.get("wrong", 0)) for rows in systems.values() for r in rows.values())
    text = table(systems, args.nodes, args.devices, line)
    if line:
        text += "\nline: one TCP stream node0 -> node1 %.3f GB/s\n" % line
    text += "\nacceptance:\n" + verdict(systems, args.nodes, line)
    text += "\nwrong values (--check): %d\n" % wrong
    print(text, end="")
    if args.table:
        with open(args.table, "w") as f:
            f.write(text)
    if args.png:
        rounds = max(row.get("rounds", 1) for rows in systems.values() for row in rows.values())
        title = "allreduce, %d nodes x %d devices vs %d processes, %s ports%s" % (
            args.nodes, args.devices, args.nodes * args.devices, args.rate or "unshaped",
            ", fastest of %d rounds" % rounds if rounds > 1 else "")
        try:
            plot(systems, args.png, args.nodes, args.devices, args.rate, line, title)
        except ImportError:
            print("plot_hierarchy: matplotlib missing (apt-get install python3-matplotlib): no PNG",
                  file=sys.stderr)


if __name__ == "__main__":
    main()
