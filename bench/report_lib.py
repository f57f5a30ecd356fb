"""What bench/report_*.py print the same way: the verdict table of an issue's acceptance lines
and the closing line saying which command, commit and machine load the figures came from."""


def verdict_lines(verdicts):
    """Markdown table of (line, measured, target, ok) tuples."""
    lines = ["| acceptance line | measured | target | met |", "|---|---:|---:|---|"]
    for line, measured, target, ok in verdicts:
        lines.append("| %s | %.3f | %s | %s |" % (line, measured, target, "yes" if ok else "NO"))
    return lines


def provenance_line(meta):
    """The run's command, commit and load average before -> after, from the script's meta.json."""
    return "command: `%s` (commit %s, load %s -> %s)" % (
        meta.get("command"), meta.get("commit"), meta.get("loadavg_start"),
        meta.get("loadavg_end"))
