#!/usr/bin/env python3
"""bench/report_dgc.py on made-up results: the speed, efficiency, accuracy and kernel verdicts come
out with the right figures and yes/NO, the table is written, and parts without results are left
out rather than failing.

  report_dgc_test.py REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile


def replay(run, profile, ranks, step_ms, compute_ms=0, sent=0.0, efficiency=None):
    return {"run": run, "profile": profile, "ranks": ranks, "mean_step_ms": step_ms,
            "compute_ms": compute_ms, "bytes": 100 << 20, "tensors": 10, "wrong": 0,
            "compressed_bytes_per_step": sent, "sparse_tensors_per_step": 4,
            "scaling_efficiency": efficiency}


def main():
    repo = sys.argv[1]
    out = tempfile.mkdtemp(prefix="ringd-report-dgc-")
    runs = [replay("dense", "resnet50", 4, 1200.0), replay("dgc", "resnet50", 4, 100.0, sent=4e5),
            replay("dense", "resnet50", 8, 1500.0), replay("dgc", "resnet50", 8, 300.0, sent=4e5),
            replay("dense-compute", "resnet50", 8, 1600.0, 300, efficiency=0.1875),
            replay("dgc-compute", "resnet50", 8, 320.0, 300, 4e5, efficiency=0.9375)]
    accuracy = [{"mode": mode, "seed": seed, "test_accuracy": value, "train_seconds": 1.0,
                 "epochs": [{"epoch": 1, "step": 10, "test_accuracy": value}]}
                for mode, seed, value in [("none", 1, 0.870), ("none", 2, 0.874),
                                          ("dgc-0.999", 1, 0.850), ("dgc-0.999", 2, 0.852)]]
    kernel = {"benchmarks": [{"name": "BM_SelectAndPack/999/500", "run_type": "iteration",
                              "real_time": 9.5, "time_unit": "ms"}]}
    with open(os.path.join(out, "runs.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in runs))
    with open(os.path.join(out, "accuracy.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in accuracy))
    cnn = [{"model": "cnn", "mode": mode, "seed": 1, "test_accuracy": value,
            "lr_schedule": "cosine", "train_seconds": 1.0,
            "epochs": [{"epoch": 1, "test_accuracy": value}]}
           for mode, value in [("none", 0.905), ("dgc-0.999", 0.902)]]
    with open(os.path.join(out, "cnn.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in cnn))
    with open(os.path.join(out, "kernel.json"), "w") as f:
        json.dump(kernel, f)
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump({"command": "test", "commit": "abc"}, f)
    done = subprocess.run([sys.executable, os.path.join(repo, "bench", "report_dgc.py"), "--out",
                           out, "--meta", os.path.join(out, "meta.json"), "--no-plot"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"FAIL: report_dgc.py exited {done.returncode}:\n{done.stderr}")
    text = open(os.path.join(out, "table.md")).read()
    expected = [
        "| resnet50, 4 nodes: communication per step, dgc vs dense (x faster) | 12.000 | >= 10 | yes |",
        "| resnet50, 8 nodes: communication per step, dgc vs dense (x faster) | 5.000 | >= 10 | NO |",
        "| resnet50, 8 nodes, compute 300 ms: dgc scaling efficiency | 0.938 | >= 0.90 | yes |",
        "| MLP test accuracy, dense minus dgc 99.9% (points) | 2.100 | <= 0.5 | NO |",
        "| PyTorch CNN test accuracy, dense minus dgc 99.9% (points) | 0.300 | <= 0.5 | yes |",
        "| none | cosine | 1 | 0.9050 | 0.9050..0.9050 | 0.9050 |",
        "| BM_SelectAndPack/999/500 (ms) | 9.500 | <= 10 | yes |",
    ]
    for line in expected:
        if line not in text:
            sys.exit(f"FAIL: the report lacks\n  {line}\n{text}")
    print(f"ok   {len(expected)} verdicts as expected")

    # Only a kernel result: the other parts are left out, not an error.
    for name in ("runs.jsonl", "accuracy.jsonl", "cnn.jsonl"):
        os.remove(os.path.join(out, name))
    done = subprocess.run([sys.executable, os.path.join(repo, "bench", "report_dgc.py"), "--out",
                           out, "--meta", os.path.join(out, "meta.json"), "--no-plot"],
                          capture_output=True, text=True)
    if done.returncode != 0 or "## Speed" in done.stdout or "## Accuracy" in done.stdout or \
            "## Selection kernel" not in done.stdout:
        sys.exit(f"FAIL: kernel-only report:\n{done.stdout}\n{done.stderr}")
    print("ok   a kernel-only run reports the kernel alone")


if __name__ == "__main__":
    main()
