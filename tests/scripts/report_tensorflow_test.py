#!/usr/bin/env python3
"""bench/report_tensorflow.py on made-up results: issue 38's verdicts (10 Gbit/s against
MultiWorkerMirroredStrategy, 1 Gbit/s against the best parameter-server layout, one rank against
plain TensorFlow) come out with the right ratios and yes/NO from the medians of the rounds, the
Keras CNN table is written, and missing parts are left out.

  report_tensorflow_test.py REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile


def synthetic(framework, rate, rate_per_rank, part="synthetic", round_=None):
    run = {"part": part, "framework": framework, "rate": rate, "profile": "resnet50",
           "compute_ms": 0, "ranks": 4 if part == "synthetic" else 1,
           "img_per_s_per_rank": rate_per_rank, "interval": 1.0}
    if round_ is not None:
        run["round"] = round_
    return run


def report(repo, out):
    return subprocess.run([sys.executable, os.path.join(repo, "bench", "report_tensorflow.py"),
                           "--out", out, "--meta", os.path.join(out, "meta.json"), "--no-plot"],
                          capture_output=True, text=True, timeout=60)


def main():
    repo = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="ringd-report-tensorflow-") as out:
        return check(repo, out)


def check(repo, out):
    runs = [synthetic("ringd", "10gbit", 130.0, round_=2), synthetic("ringd", "10gbit", 90.0,
                                                                      round_=1),
            synthetic("ringd", "10gbit", 150.0, round_=3),  # median 130
            synthetic("mwms", "10gbit", 100.0),  # 1.30: yes
            synthetic("ringd", "1gbit", 50.0), synthetic("ps1", "1gbit", 20.0),
            synthetic("ps2", "1gbit", 30.0),  # 50 / max(20, 30) = 1.667: NO
            synthetic("mwms", "1gbit", 40.0),
            synthetic("none", "none", 100.0, "single", 1),
            synthetic("ringd", "none", 94.0, "single", 1),
            synthetic("none", "none", 90.0, "single", 2),
            synthetic("ringd", "none", 99.0, "single", 2),
            synthetic("none", "none", 110.0, "single", 3),
            synthetic("ringd", "none", 93.0, "single", 3),
            {"part": "cnn", "framework": "mwms", "rate": "1gbit", "ranks": 4,
             "epochs": [{"epoch": 1, "loss": 0.5, "test_accuracy": 0.871, "epoch_s": 60.0,
                         "samples_per_s": 1000.0}]}]
    with open(os.path.join(out, "runs.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in runs))
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump({"command": "bench/compare_tensorflow.sh", "commit": "abc"}, f)
    result = report(repo, out)
    expected = [
        "| 10 Gbit/s: ringd / MultiWorkerMirroredStrategy | 1.300 | >= 1.3 | yes |",
        "| 1 Gbit/s: ringd / best parameter-server layout | 1.667 | >= 2 | NO |",
        # medians: plain 100, ringd 94 (not the last round's 110 and 93)
        "| one rank: ringd slower than plain TensorFlow (%) | 6.000 | <= 5 | NO |",
        "| plain TensorFlow | 100.0 | 100.0, 90.0, 110.0 |",
        "| 10gbit | ringd.tensorflow / ringd.keras | 130.0 | 90.0, 130.0, 150.0 | +-1.0 | - |",
        "| 1gbit | ParameterServerStrategy, 2 PS | 30.0 | 30.0 | +-1.0 | 1.67x |",
        "| 1gbit | MultiWorkerMirroredStrategy (ring) | 1 | 0.8710 | 60.0 | 1000 |",
    ]
    failures = [line for line in expected if line not in result.stdout]
    if result.returncode != 0:
        failures.append("exit %d: %s" % (result.returncode, result.stderr))
    with open(os.path.join(out, "runs.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in runs if r["part"] == "single"))
    alone = report(repo, out)
    if alone.returncode != 0 or "Synthetic" in alone.stdout or "one rank" not in alone.stdout:
        failures.append("single part alone: exit %d\n%s%s" % (alone.returncode, alone.stdout,
                                                              alone.stderr))
    for failure in failures:
        print("FAIL: missing or wrong: " + failure)
    if failures:
        print(result.stdout)
        return 1
    print("%d passed, 0 failed" % (len(expected) + 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
