#!/usr/bin/env python3
"""`ringd train` as a user runs it, on small synthetic IDX files written here:

  1. an uninterrupted run (2 inproc ranks, checkpoints every 20 steps) -> reference parameters;
  2. the same run SIGKILLed mid-way (after its step-40 checkpoint), the newest checkpoint then
     corrupted, and `--resume`: the corrupt file is skipped with a warning, and the final parameters
     are bitwise those of the uninterrupted run;
  3. under mpirun: 4 processes with batch 4 end within 1e-4 (relative) of 1 process with batch 16;
     standalone (--rank/--size/--rendezvous over tcp): 2 processes end bitwise where 2 inproc
     ranks do;
  2b. the same run sent SIGTERM (what Kubernetes sends a pod) between checkpoints: it stops after
     the step it is in, rank 0 writes that step's checkpoint, it exits 143 without --params-out,
     and `--resume` ends bitwise where the uninterrupted run does;
  4. a bad IDX file is an error naming it;
  5. a really full disk (a 1.2 MB tmpfs, where mounting is allowed): the checkpoint that does not
     fit is a clear error, the previous one stays intact and a resumed run reads it.

usage: train_test.py RINGD HAVE_MPI"""
import array
import gzip
import json
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import time

import harness
from harness import check

STEPS = 120


def write_idx(path, dims, data, compress=False):
    header = bytes([0, 0, 8, len(dims)]) + b"".join(d.to_bytes(4, "big") for d in dims)
    opener = gzip.open if compress else open
    with opener(path, "wb") as out:
        out.write(header + bytes(data))


def write_dataset(directory, train_rows=1024, test_rows=200, seed=5):
    """4x4 images, 4 classes decided by a fixed random linear teacher."""
    rng = random.Random(seed)
    teacher = [[rng.uniform(-1, 1) for _ in range(16)] for _ in range(4)]
    for split, rows in (("train", train_rows), ("t10k", test_rows)):
        pixels, labels = [], []
        for _ in range(rows):
            image = [rng.randrange(256) for _ in range(16)]
            scores = [sum(w * p for w, p in zip(row, image)) for row in teacher]
            pixels += image
            labels.append(scores.index(max(scores)))
        write_idx(os.path.join(directory, f"{split}-images-idx3-ubyte.gz"), [rows, 4, 4], pixels,
                  compress=True)
        write_idx(os.path.join(directory, f"{split}-labels-idx1-ubyte"), [rows], labels)


def read_floats(path):
    values = array.array("f")
    with open(path, "rb") as f:
        values.frombytes(f.read())
    return values


def train_args(data, checkpoint_dir, out_prefix, extra=()):
    return ["train", "--data", data, "--layers", "16,12,4", "--batch-size", "8", "--lr", "0.05",
            "--warmup-steps", "10", "--epochs", "100", "--max-steps", str(STEPS), "--log-every",
            "20", "--checkpoint-dir", checkpoint_dir, "--checkpoint-every", "20",
            "--keep-checkpoints", "0", "--json", out_prefix + ".json", "--params-out",
            out_prefix + ".params", "--timeout", "60", *extra]


def check_ok(label, code, stdout, stderr):
    check(code == 0, f"{label}: exit code {code}\nstdout:\n{stdout}\nstderr:\n{stderr}")


def kill_and_resume(ringd, directory, data):
    inproc = ["--transport", "inproc", "--ranks", "2"]
    reference = os.path.join(directory, "reference")
    code, stdout, stderr, seconds = harness.run(
        [ringd, *train_args(data, os.path.join(directory, "ckpt-ref"), reference, inproc)],
        "uninterrupted run", timeout=120)
    check_ok("uninterrupted run", code, stdout, stderr)
    check("test accuracy" in stdout and "checkpoint: " in stdout, f"no closing lines:\n{stdout}")
    with open(reference + ".json") as f:
        summary = json.load(f)
    check(summary["steps"] == STEPS and summary["ranks"] == 2 and summary["global_batch"] == 16,
          f"summary {summary}")
    print(f"ok   uninterrupted run in {seconds:.1f} s (test accuracy {summary['test_accuracy']})",
          flush=True)

    # The killed run sleeps 25 ms per step so that it is surely still running at step 40.
    checkpoints = os.path.join(directory, "ckpt-killed")
    killed = os.path.join(directory, "killed")
    process = subprocess.Popen(
        [ringd, *train_args(data, checkpoints, killed, [*inproc, "--throttle-ms", "25"])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=harness.environment())
    wanted = os.path.join(checkpoints, "ckpt-0000000040.ringd")
    deadline = time.monotonic() + 60
    while not os.path.exists(wanted) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if process.poll() is not None:
        raise harness.Failure(f"the run ended before it could be killed: {process.communicate()}")
    check(os.path.exists(wanted), "no step-40 checkpoint within 60 s")
    process.send_signal(signal.SIGKILL)
    process.wait()
    names = sorted(n for n in os.listdir(checkpoints) if n.startswith("ckpt-"))
    check(f"ckpt-{STEPS:010d}.ringd" not in names, f"killed too late: {names}")
    # Corrupt the newest complete checkpoint: --resume must skip it and use the one before.
    newest = os.path.join(checkpoints, names[-1])
    with open(newest, "r+b") as f:
        f.seek(64)
        byte = f.read(1)
        f.seek(64)
        f.write(bytes([byte[0] ^ 0xFF]))
    code, stdout, stderr, _ = harness.run(
        [ringd, *train_args(data, checkpoints, killed, [*inproc, "--resume"])], "resumed run",
        timeout=120)
    check_ok("resumed run", code, stdout, stderr)
    check(f"skipping checkpoint {newest}" in stderr, f"no warning about {newest}:\n{stderr}")
    previous = os.path.join(checkpoints, names[-2])
    check(f"resuming from {previous}" in stdout, f"did not resume from {previous}:\n{stdout}")
    with open(killed + ".json") as f:
        resumed = json.load(f)
    check(resumed["params_sha256"] == summary["params_sha256"],
          f"resumed run's parameters differ: {resumed['params_sha256']} vs "
          f"{summary['params_sha256']}")
    with open(reference + ".params", "rb") as a, open(killed + ".params", "rb") as b:
        check(a.read() == b.read(), "--params-out files differ")
    print(f"ok   killed after {names[-1]}, newest corrupted, resumed from {names[-2]}: "
          f"bitwise the same final parameters", flush=True)
    sigterm_and_resume(ringd, directory, data, summary["params_sha256"])

    standalone = os.path.join(directory, "standalone")
    job = harness.Job(ringd, 2, train_args(data, os.path.join(directory, "ckpt-standalone"),
                                           standalone))
    codes = job.wait(120)
    check(codes == [0, 0], f"standalone: exit codes {codes}: {job.output(0)} {job.output(1)}")
    with open(reference + ".params", "rb") as a, open(standalone + ".params", "rb") as b:
        check(a.read() == b.read(), "standalone tcp ranks end elsewhere than inproc ranks")
    print("ok   2 standalone tcp processes: bitwise the inproc run's parameters", flush=True)


def mpirun_matches_one_rank(ringd, directory, data):
    common = ["train", "--data", data, "--layers", "16,12,4", "--epochs", "100", "--max-steps",
              "50", "--warmup-steps", "10", "--no-eval", "--log-every", "25", "--timeout", "60"]
    outputs = {}
    for np, batch, lr in ((4, 4, "0.05"), (1, 16, "0.2")):
        out = os.path.join(directory, f"np{np}.params")
        command = harness.mpirun(np, [ringd, *common, "--batch-size", str(batch), "--lr", lr,
                                      "--params-out", out])
        code, stdout, stderr, seconds = harness.run(command, f"mpirun -np {np}", timeout=120)
        check_ok(f"mpirun -np {np}", code, stdout, stderr)
        outputs[np] = read_floats(out)
        print(f"ok   mpirun -np {np} --batch-size {batch} in {seconds:.1f} s", flush=True)
    many, one = outputs[4], outputs[1]
    check(len(many) == len(one) == 16 * 12 + 12 + 12 * 4 + 4, f"sizes {len(many)} {len(one)}")
    largest = max(abs(v) for v in one)
    worst = max(abs(a - b) for a, b in zip(many, one))
    check(worst <= 1e-4 * largest, f"4 processes vs 1: max difference {worst} > 1e-4 x {largest}")
    print(f"ok   4 processes vs 1 after 50 steps: max difference / max value = "
          f"{worst / largest:.2g}", flush=True)


def bad_idx(ringd, directory):
    bad = os.path.join(directory, "bad")
    os.makedirs(bad)
    write_idx(os.path.join(bad, "train-images-idx3-ubyte"), [10, 4, 4], [0] * 150)  # 10 short
    write_idx(os.path.join(bad, "train-labels-idx1-ubyte"), [10], [0] * 10)
    code, stdout, stderr, _ = harness.run(
        [ringd, "train", "--data", bad, "--layers", "16,4", "--transport", "inproc", "--ranks",
         "1"], "bad IDX", timeout=60)
    path = os.path.join(bad, "train-images-idx3-ubyte")
    check(code == 1 and path in stderr and "truncated" in stderr,
          f"bad IDX: exit code {code}, stderr:\n{stderr}")
    print("ok   a truncated IDX file is an error naming it", flush=True)


def full_disk(ringd, directory):
    mount = os.path.join(directory, "small-fs")
    os.makedirs(mount)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1200k", "tmpfs",
                                            mount], capture_output=True).returncode != 0:
        print("skip full disk: cannot mount a tmpfs here (needs root)", flush=True)
        return
    try:
        profile = os.path.join(directory, "small.tsv")
        with open(profile, "w") as out:
            out.write("a.weight\t100000\na.bias\t10\n")  # 800 KB per checkpoint with momentum
        checkpoints = os.path.join(mount, "ckpt")
        common = ["train", "--model", "replay", "--profile", profile, "--transport", "inproc",
                  "--ranks", "2", "--checkpoint-dir", checkpoints, "--timeout", "60"]
        code, stdout, stderr, _ = harness.run(
            [ringd, *common, "--steps-per-epoch", "10", "--epochs", "1", "--checkpoint-every", "5"],
            "full disk", timeout=60)
        check(code == 1 and "no space left on the device writing checkpoint" in stderr and
              "ckpt-0000000010.ringd" in stderr, f"full disk: exit {code}, stderr:\n{stderr}")
        check(os.listdir(checkpoints) == ["ckpt-0000000005.ringd"],
              f"full disk left {os.listdir(checkpoints)}")
        code, stdout, stderr, _ = harness.run(
            [ringd, *common, "--steps-per-epoch", "5", "--epochs", "1", "--resume"],
            "resume after full disk", timeout=60)
        check(code == 0 and "resuming from " + os.path.join(checkpoints, "ckpt-0000000005.ringd")
              in stdout and "skipping" not in stderr,
              f"resume after full disk: exit {code}\nstdout:\n{stdout}\nstderr:\n{stderr}")
        print("ok   a full disk (tmpfs) is a clear error; the previous checkpoint stays usable",
              flush=True)
    finally:
        subprocess.run(["umount", mount], capture_output=True)


def sigterm_and_resume(ringd, directory, data, reference_sha256):
    inproc = ["--transport", "inproc", "--ranks", "2"]
    checkpoints = os.path.join(directory, "ckpt-sigterm")
    stopped = os.path.join(directory, "sigterm")
    # 25 ms per step (120 steps: 3 s); no checkpoint is due before the end.
    args = train_args(data, checkpoints, stopped,
                      [*inproc, "--throttle-ms", "25", "--checkpoint-every", "1000"])
    process = subprocess.Popen([ringd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=harness.environment())
    time.sleep(1.0)
    if process.poll() is not None:
        raise harness.Failure(f"the run ended before SIGTERM: {process.communicate()}")
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    check(process.returncode == 143,
          f"exit {process.returncode} after SIGTERM (expected 143)\n{stdout}\n{stderr}")
    match = re.search(r"^stopping after step (\d+) of 120: signal 15 \(SIGTERM\) here$", stdout,
                      re.M)
    check(match is not None, f"no stop line:\n{stdout}")
    step = int(match.group(1))
    check(0 < step < STEPS, f"stopped after step {step}")
    written = os.path.join(checkpoints, f"ckpt-{step:010d}.ringd")
    check(sorted(os.listdir(checkpoints)) == [os.path.basename(written)],
          f"checkpoints after the stop: {os.listdir(checkpoints)}, expected {written}")
    with open(stopped + ".json") as f:
        summary = json.load(f)
    check(summary["stopped_by_signal"] == 15 and summary["steps"] == step, f"summary {summary}")
    check(not os.path.exists(stopped + ".params"), "--params-out written by a stopped run")
    code, stdout, stderr, _ = harness.run(
        [ringd, *train_args(data, checkpoints, stopped, [*inproc, "--resume"])],
        "run resumed after SIGTERM", timeout=120)
    check_ok("run resumed after SIGTERM", code, stdout, stderr)
    check(f"resuming from {written}" in stdout, f"did not resume from {written}:\n{stdout}")
    with open(stopped + ".json") as f:
        resumed = json.load(f)
    check(resumed["params_sha256"] == reference_sha256 and resumed["stopped_by_signal"] is None,
          f"resumed after SIGTERM: {resumed}, reference {reference_sha256}")
    print(f"ok   SIGTERM: stopped after step {step} with its checkpoint (exit 143); resumed to "
          f"bitwise the same final parameters", flush=True)


def test(ringd, args):
    have_mpi = args[0] == "1"
    directory = tempfile.mkdtemp(prefix="ringd-train-")
    try:
        data = os.path.join(directory, "data")
        os.makedirs(data)
        write_dataset(data)
        kill_and_resume(ringd, directory, data)
        bad_idx(ringd, directory)
        full_disk(ringd, directory)
        if have_mpi and shutil.which("mpirun"):
            mpirun_matches_one_rank(ringd, directory, data)
        else:
            print("skip mpirun comparison: built without MPI or no mpirun", flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    harness.main(test)
