#!/usr/bin/env python3
"""bench/report_pytorch.py on made-up results: the synthetic benchmark's verdicts (10 Gbit/s
against the best peer, 1 Gbit/s against Horovod and DDP, one rank against plain PyTorch) come out
with the right ratios and yes/NO, computed from the medians of a framework's rounds (listed in
round order, whatever the order of the lines), the CNN table is written, and missing parts are
left out.

  report_pytorch_test.py REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile


def synthetic(framework, rate, rate_per_rank, part="synthetic", round_=None, interval=1.0):
    run = {"part": part, "framework": framework, "rate": rate, "profile": "resnet50",
           "compute_ms": 100, "ranks": 4 if part == "synthetic" else 1,
           "img_per_s_per_rank": rate_per_rank, "interval": interval}
    if round_ is not None:
        run["round"] = round_
    return run


def main():
    repo = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="ringd-report-pytorch-") as out:
        return check(repo, out)


def check(repo, out):
    # 10 Gbit/s in three rounds (the lines out of round order): medians ringd 140 (not the mean,
    # 130), DDP 120 (not its best round, 160); Horovod's one run has no round number.
    runs = [synthetic("ringd", "10gbit", 100.0, round_=3, interval=3.0),
            synthetic("ringd", "10gbit", 150.0, round_=1, interval=1.0),
            synthetic("ringd", "10gbit", 140.0, round_=2, interval=2.0),
            synthetic("ddp", "10gbit", 120.0, round_=1),
            synthetic("ddp", "10gbit", 160.0, round_=2),
            synthetic("ddp", "10gbit", 110.0, round_=3),
            synthetic("horovod", "10gbit", 100.0),  # 140 / max(120, 100) = 1.17: NO
            # DDP on ringd's backend is ringd's: a row, but not a peer of the verdict.
            synthetic("ddp-ringd", "10gbit", 130.0),
            synthetic("ringd", "1gbit", 60.0), synthetic("horovod", "1gbit", 30.0),  # 2.0: yes
            synthetic("ddp", "1gbit", 75.0),  # 0.8: NO
            synthetic("none", "none", 100.0, "single"), synthetic("ringd", "none", 97.0, "single"),
            {"part": "cnn", "framework": "ringd", "rate": "1gbit", "ranks": 4,
             "epochs": [{"epoch": 1, "loss": 0.5, "test_accuracy": 0.881, "train_s": 50.0,
                         "samples_per_s": 1200.0}]}]
    with open(os.path.join(out, "runs.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in runs))
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump({"command": "bench/compare_pytorch.sh", "commit": "abc",
                   "host_tcp_congestion": "bbr",
                   "ringd_env": {"RINGD_CLUSTER_CONGESTION": "cubic"}}, f)
    result = subprocess.run([sys.executable, os.path.join(repo, "bench", "report_pytorch.py"),
                             "--out", out, "--meta", os.path.join(out, "meta.json"), "--no-plot"],
                            capture_output=True, text=True, timeout=60)
    text = result.stdout
    expected = [
        "| 10 Gbit/s: ringd.torch / best of Horovod and DDP | 1.167 | >= 1.3 | NO |",
        "| 1 Gbit/s: ringd.torch / Horovod | 2.000 | >= 1.5 | yes |",
        "| 1 Gbit/s: ringd.torch / DDP | 0.800 | >= 1.0 | NO |",
        "| one rank: ringd.torch slower than plain PyTorch (%) | 3.000 | <= 5 | yes |",
        "| 1gbit | ringd.torch | 1 | 0.8810 | 50.0 | 1200 |",
        "| 10gbit | Horovod 0.28.1 (MPI) | 100.0 | 100.0 | +-1.0 | 1.40x |",
        "| 10gbit | ringd.torch | 140.0 | 150.0, 140.0, 100.0 | +-2.0 | - |",
        "| 10gbit | PyTorch DDP (gloo) | 120.0 | 120.0, 160.0, 110.0 | +-1.0 | 1.17x |",
        "| 10gbit | PyTorch DDP (ringd backend) | 130.0 | 130.0 | +-1.0 | 1.08x |",
        # Which congestion control the peers ran on (the nodes', not the host's, when chosen).
        "the nodes' default TCP congestion control cubic (RINGD_CLUSTER_CONGESTION))",
    ]
    failures = [line for line in expected if line not in text]
    if result.returncode != 0:
        failures.append("exit %d: %s" % (result.returncode, result.stderr))
    if not os.path.exists(os.path.join(out, "table.md")):
        failures.append("no table.md")
    # Only the single part: the other sections and verdicts are left out, nothing fails.
    with open(os.path.join(out, "runs.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in runs if r["part"] == "single"))
    alone = subprocess.run([sys.executable, os.path.join(repo, "bench", "report_pytorch.py"),
                            "--out", out, "--meta", os.path.join(out, "meta.json"), "--no-plot"],
                           capture_output=True, text=True, timeout=60)
    if alone.returncode != 0 or "Synthetic" in alone.stdout or "one rank" not in alone.stdout:
        failures.append("single part alone: exit %d\n%s%s" % (alone.returncode, alone.stdout,
                                                              alone.stderr))
    for failure in failures:
        print("FAIL: missing or wrong: " + failure)
    if failures:
        print(text)
        return 1
    print("%d passed, 0 failed" % (len(expected) + 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
