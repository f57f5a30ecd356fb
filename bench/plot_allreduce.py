#!/usr/bin/env python3
"""Side-by-side table and busbw plot of the allreduce sweeps in one compare_allreduce.sh run.

    bench/plot_allreduce.py --dir DIR [--rate 1gbit] [--line-GBps 0.119] [--stat median|min]
                            [--table DIR/table.md] [--png DIR/allreduce_busbw.png] [--title T]

Reads every DIR/<system>.jsonl (one JSON object per size, the keys of `ringd bench --json`:
op bytes count dtype redop ranks transport time_us algbw_GBps busbw_GBps wrong) and, if present,
DIR/line_summary.json. A file may hold several rounds of the same sweep: each size shows its
median round (--stat median, the default; the lower middle one of an even count) or its fastest
(--stat min), and with several rounds the range of their times. Systems whose name starts with
"ringd" are ringd; every other one is a reference. Per size the table shows each system's time
and busbw, then
  busbw ringd/best other: the best ringd busbw over the best reference busbw (> 1: ringd ahead),
  time ringd/min(MPI,Gloo): the best ringd time over the best reference time (< 1: ringd ahead;
  the references are Open MPI and every Gloo algorithm measured), and the fastest system.
The plot draws busbw against size, one line per system, with the line rate marked.
"""
import argparse
import json
import math
import os
import sys

# Known systems, in the order of the table, with their labels; any other .jsonl comes after.
KNOWN = [
    ("ringd-tcp", "ringd tcp"),
    ("ringd-mpi", "ringd mpi"),
    ("openmpi", "Open MPI"),
    ("gloo", "Gloo ring"),
    ("gloo-hd", "Gloo halving-doubling"),
]


def load_system(path, stat="median"):
    """Per size, the median round in the file (stat "median") or the fastest (stat "min": other
    work on a shared machine only ever slows a round down), with "rounds" = how many rounds
    measured that size and "range_us" = their fastest and slowest times."""
    rounds = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            row = json.loads(line)
            rounds.setdefault(int(row["bytes"]), []).append(row)
    rows = {}
    for size, measured in rounds.items():
        measured.sort(key=lambda r: r["time_us"])
        row = dict(measured[(len(measured) - 1) // 2] if stat == "median" else measured[0])
        row["rounds"] = len(measured)
        row["range_us"] = (measured[0]["time_us"], measured[-1]["time_us"])
        rows[size] = row
    return rows


def load(directory, stat="median"):
    names = sorted(p[:-6] for p in os.listdir(directory) if p.endswith(".jsonl"))
    ordered = [n for n, _ in KNOWN if n in names] + [n for n in names if n not in dict(KNOWN)]
    systems = {n: load_system(os.path.join(directory, n + ".jsonl"), stat) for n in ordered}
    return {n: rows for n, rows in systems.items() if rows}


def label(name):
    return dict(KNOWN).get(name, name)


def size_text(size):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return "%d%s" % (size >> shift, unit)
    return str(size)


def time_text(us):
    if us < 1000:
        return "%.0f µs" % us
    if us < 1e6:
        return "%.1f ms" % (us / 1e3) if us < 1e5 else "%.0f ms" % (us / 1e3)
    return "%.2f s" % (us / 1e6)


def rate_GBps(rate):
    """Nominal payload-free line rate of a tc rate such as 1gbit, in GB/s."""
    rate = rate.lower()
    for suffix, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)):
        if rate.endswith(suffix):
            return float(rate[: -len(suffix)]) * scale / 8e9
    raise ValueError("rate %r" % rate)


def table(systems):
    sizes = sorted({s for rows in systems.values() for s in rows})
    ringd = [n for n in systems if n.startswith("ringd")]
    others = [n for n in systems if not n.startswith("ringd")]
    header = ["size"] + ["%s time (busbw GB/s)" % label(n) for n in systems]
    header += ["busbw ringd/best other", "time ringd/min(MPI,Gloo)", "fastest"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for size in sizes:
        cells = [size_text(size)]
        for name in systems:
            row = systems[name].get(size)
            if not row:
                cells.append("–")
            elif row["rounds"] > 1:
                low, high = row["range_us"]
                cells.append("%s (%.3f; %s-%s)" % (time_text(row["time_us"]), row["busbw_GBps"],
                                                   time_text(low), time_text(high)))
            else:
                cells.append("%s (%.3f)" % (time_text(row["time_us"]), row["busbw_GBps"]))
        present = {n: systems[n][size] for n in systems if size in systems[n]}
        best_ringd = min((present[n] for n in ringd if n in present), key=lambda r: r["time_us"],
                         default=None)
        best_other = min((present[n] for n in others if n in present), key=lambda r: r["time_us"],
                         default=None)
        refs = [present[n]["time_us"] for n in others if n in present]
        cells.append("%.2f" % (best_ringd["busbw_GBps"] / best_other["busbw_GBps"])
                     if best_ringd and best_other else "–")
        cells.append("%.2f" % (best_ringd["time_us"] / min(refs)) if best_ringd and refs else "–")
        fastest = min(present, key=lambda n: present[n]["time_us"])
        cells.append(label(fastest))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def verdict_line(who, mine_names, systems, others, bound):
    over = []
    compared = 0
    for size in sorted({s for rows in systems.values() for s in rows}):
        mine = [systems[n][size]["time_us"] for n in mine_names if size in systems[n]]
        refs = [systems[n][size]["time_us"] for n in others if size in systems[n]]
        if mine and refs:
            compared += 1
            if min(mine) > bound * min(refs):
                over.append("%s (%.2f x)" % (size_text(size), min(mine) / min(refs)))
    if not compared:
        return ""
    if over:
        return "%s above %.2f x the best reference at: %s\n" % (who, bound, ", ".join(over))
    return "%s within %.2f x the best reference at all %d sizes\n" % (who, bound, compared)


def verdict(systems, bound=1.05):
    """Issue 3's and 18's line: the best ringd time at most `bound` x the best reference's at every
    size both measured; with several ringd transports, each one's own line too (a user runs one)."""
    ringd = [n for n in systems if n.startswith("ringd")]
    others = [n for n in systems if not n.startswith("ringd")]
    if not ringd or not others:
        return ""
    text = verdict_line("ringd", ringd, systems, others, bound)
    if len(ringd) > 1:
        for name in ringd:
            text += verdict_line(label(name), [name], systems, others, bound)
    return "\n" + text if text else ""


def plot(systems, png, rate, line_GBps, ring_GBps, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 4.2), dpi=100)
    markers = "osD^vx+*"
    for i, (name, rows) in enumerate(systems.items()):
        sizes = sorted(rows)
        ax.plot(sizes, [rows[s]["busbw_GBps"] for s in sizes], marker=markers[i % len(markers)],
                markersize=4, linewidth=1.5, label=label(name))
    if rate:
        ax.axhline(rate_GBps(rate), color="grey", linestyle=":", linewidth=1,
                   label="tc rate %s (%.3f GB/s)" % (rate, rate_GBps(rate)))
    if line_GBps:
        ax.axhline(line_GBps, color="black", linestyle="--", linewidth=1,
                   label="one TCP stream (%.3f GB/s)" % line_GBps)
    if ring_GBps:
        ax.axhline(ring_GBps, color="dimgray", linestyle="-.", linewidth=1,
                   label="ring of TCP streams, each (%.3f GB/s)" % ring_GBps)
    sizes = sorted({s for rows in systems.values() for s in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([size_text(s) for s in sizes])
    ax.set_yscale("log")
    ax.set_xlabel("allreduce size (float32 sum)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
    try:  # a 64-colour palette keeps the PNG small enough to commit (~25 KB instead of ~65 KB)
        from PIL import Image

        with Image.open(png) as image:
            small = image.convert("RGB").quantize(colors=64)
        small.save(png, optimize=True)
    except ImportError:
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--rate", default="")
    parser.add_argument("--line-GBps", type=float, default=None)
    parser.add_argument("--table", default=None)
    parser.add_argument("--png", default=None)
    parser.add_argument("--title", default=None)
    parser.add_argument("--stat", choices=("median", "min"), default="median")
    args = parser.parse_args()

    systems = load(args.dir, args.stat)
    if not systems:
        sys.exit("plot_allreduce: no .jsonl results in %s" % args.dir)
    ring_GBps = None
    summary_path = os.path.join(args.dir, "line_summary.json")
    if os.path.exists(summary_path):
        summary = json.load(open(summary_path))
        if args.line_GBps is None:
            args.line_GBps = summary.get("single_stream_GBps")
        ring_GBps = summary.get("ring_min_GBps")

    ranks = {row["ranks"] for rows in systems.values() for row in rows.values()}
    text = table(systems) + verdict(systems)
    print(text, end="")
    if args.line_GBps:
        print("\nline: one TCP stream %.3f GB/s" % args.line_GBps
              + (", ring of streams %.3f GB/s each (min)" % ring_GBps if ring_GBps else ""))
    if args.table:
        with open(args.table, "w") as f:
            f.write(text)
    if args.png:
        rounds = max(row.get("rounds", 1) for rows in systems.values() for row in rows.values())
        title = args.title or "allreduce busbw, %s ranks, one per node, %s ports%s" % (
            "/".join(str(r) for r in sorted(ranks)), args.rate or "unshaped",
            ", %s of %d rounds" % ("median" if args.stat == "median" else "fastest", rounds)
            if rounds > 1 else "")
        try:
            plot(systems, args.png, args.rate, args.line_GBps, ring_GBps, title)
        except ImportError:
            print("plot_allreduce: matplotlib missing (apt-get install python3-matplotlib): no PNG",
                  file=sys.stderr)


if __name__ == "__main__":
    main()
