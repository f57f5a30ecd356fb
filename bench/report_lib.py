"""What bench/report_*.py do the same way: read a results file of JSON lines, the verdict table
of an issue's acceptance lines, the closing line saying which command, commit and machine load the
figures came from, and the report printed and written to DIR/table.md."""
import json
import os
import statistics


def read_jsonl(path):
    """The JSON objects of a file with one per line; [] when the file does not exist."""
    if not os.path.exists(path):
        return []
    with open(path) as lines:
        return [json.loads(line) for line in lines if line.strip()]


def verdict_lines(verdicts):
    """Markdown table of (line, measured, target, ok) tuples."""
    lines = ["| acceptance line | measured | target | met |", "|---|---:|---:|---|"]
    for line, measured, target, ok in verdicts:
        lines.append("| %s | %.3f | %s | %s |" % (line, measured, target, "yes" if ok else "NO"))
    return lines


def provenance_line(meta):
    """The run's command, commit, load average before -> after and the cluster nodes' default TCP
    congestion control (the peers' sockets use it; ringd's choose their own), from the script's
    meta.json."""
    line = "command: `%s` (commit %s, load %s -> %s" % (
        meta.get("command"), meta.get("commit"), meta.get("loadavg_start"),
        meta.get("loadavg_end"))
    chosen = meta.get("ringd_env", {}).get("RINGD_CLUSTER_CONGESTION")
    host = meta.get("host_tcp_congestion")
    if chosen:
        line += "; the nodes' default TCP congestion control %s (RINGD_CLUSTER_CONGESTION)" % chosen
    elif host:
        line += "; the nodes' default TCP congestion control %s (the host's)" % host
    return line + ")"


def write_report(out_dir, lines, verdicts, meta_path):
    """`lines`, the verdict table and the provenance line, printed and written to
    out_dir/table.md."""
    with open(meta_path) as meta:
        lines = lines + verdict_lines(verdicts) + ["", provenance_line(json.load(meta))]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(out_dir, "table.md"), "w") as table:
        table.write(text)


def rate_order(rate):
    digits = "".join(c for c in rate if c.isdigit()) or "0"
    return (rate.endswith("gbit"), int(digits))


def synthetic_medians(runs):
    """{(rate, framework): (median img/s per rank, [each round's img/s in round order],
    median of the rounds' 95% intervals)} of the synthetic runs."""
    rounds = {}
    for run in sorted(runs, key=lambda r: r.get("round", 1)):
        if run["part"] == "synthetic":
            rounds.setdefault((run["rate"], run["framework"]), []).append(run)
    return {key: (statistics.median(r["img_per_s_per_rank"] for r in rs),
                  [r["img_per_s_per_rank"] for r in rs],
                  statistics.median(r["interval"] for r in rs))
            for key, rs in rounds.items()}


def plot_synthetic(runs, path, names, order):
    """A bar per framework (in `order`, labelled by `names`) and rate: the median img/s per rank,
    the range of the rounds as error bars; False when matplotlib or the runs are missing."""
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
    frameworks = [f for f in order if any(r["framework"] == f for r in runs)]
    medians = synthetic_medians(runs)
    figure, axes = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(frameworks)
    for i, framework in enumerate(frameworks):
        xs = [j + i * width for j in range(len(rates))]
        found = [medians.get((rate, framework), (0, [0], 0)) for rate in rates]
        ys = [median for median, _, _ in found]
        # The bars span the rounds: from the slowest to the fastest.
        errors = [[median - min(each) for median, each, _ in found],
                  [max(each) - median for median, each, _ in found]]
        axes.bar(xs, ys, width, yerr=errors, label=names[framework])
    axes.set_xticks([j + width * (len(frameworks) - 1) / 2 for j in range(len(rates))])
    axes.set_xticklabels(rates)
    axes.set_ylabel("img/s per rank")
    axes.set_title("%s, %d emulated nodes (median and range of the rounds)" % (
        runs[0]["profile"], runs[0]["ranks"]))
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return True
