"""What bench/report_*.py do the same way: read a results file of JSON lines, the verdict table
of an issue's acceptance lines, the closing line saying which command, commit and machine load the
figures came from, and the report printed and written to DIR/table.md."""
import json
import os


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
