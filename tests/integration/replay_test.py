#!/usr/bin/env python3
"""`ringd bench replay` in real processes: under mpirun (mpi and tcp transports) and standalone
tcp, every gradient of the last step checked and the JSON written; the same with DGC (ranks hold
the same bits, far fewer bytes sent); then two standalone ranks given
profiles that disagree on one tensor's size must both fail with the fusion engine's mismatch error
naming the tensor, the ranks and both shapes, without hanging.

usage: replay_test.py RINGD HAVE_MPI"""
import json
import shutil
import os

import harness
from harness import check

JSON_KEYS = {"bench", "profile", "tensors", "bytes", "ranks", "transport", "compute_ms",
             "one_buffer_ms", "ideal_ms", "mean_step_ms", "scaling_efficiency", "bytes_per_s",
             "negotiation_ms", "negotiation_share", "wrong", "steps"}


def write_profile(directory, name, sizes):
    path = os.path.join(directory, f"{name}.tsv")
    with open(path, "w") as out:
        out.write("# test profile\n")
        for index, size in enumerate(sizes):
            out.write(f"layer{index}.weight\t{size}\n")
    return path


def check_run(label, code, stdout, stderr, json_path, ranks, transport):
    check(code == 0, f"{label}: exit code {code}\nstdout:\n{stdout}\nstderr:\n{stderr}")
    check("# check: 0 wrong values" in stdout, f"{label}: no clean check line:\n{stdout}")
    with open(json_path) as lines:
        results = [json.loads(line) for line in lines]
    check(len(results) == 1, f"{label}: {len(results)} JSON lines")
    result = results[0]
    check(JSON_KEYS <= set(result), f"{label}: JSON lacks {JSON_KEYS - set(result)}")
    check(result["ranks"] == ranks and result["transport"] == transport and result["wrong"] == 0,
          f"{label}: JSON {result}")


def test(ringd, args):
    have_mpi = args[0] == "1"
    directory = harness.work_dir("ringd-replay-")
    sizes = [(i % 7) * 5000 + 3 for i in range(40)]
    profile = write_profile(directory, "small", sizes)
    common = ["bench", "replay", "--profile", profile, "--compute-ms", "5", "--steps", "2",
              "--warmup-steps", "1", "--baseline-iters", "1", "--check", "--timeout", "60"]

    if shutil.which("mpirun"):
        for transport in (["mpi", "tcp"] if have_mpi else ["tcp"]):
            label = f"mpirun np=3 replay {transport}"
            json_path = os.path.join(directory, f"mpirun-{transport}.jsonl")
            rendezvous = [] if have_mpi else ["--rendezvous", f"127.0.0.1:{harness.free_port()}"]
            command = harness.mpirun(3, [ringd, *common, "--transport", transport, "--json",
                                         json_path, *rendezvous])
            code, stdout, stderr, seconds = harness.run(command, label, timeout=120)
            check_run(label, code, stdout, stderr, json_path, 3, transport)
            print(f"ok   {label} in {seconds:.1f} s", flush=True)
    else:
        print("note: no mpirun; only the standalone runs", flush=True)

    label = "standalone tcp np=2 replay resnet50"
    json_path = os.path.join(directory, "standalone.jsonl")
    job = harness.Job(ringd, 2, ["bench", "replay", "--profile", "resnet50", "--steps", "1",
                                 "--warmup-steps", "1", "--baseline-iters", "1", "--check",
                                 "--timeout", "60", "--json", json_path])
    codes = job.wait(timeout=120)
    stdout, stderr = job.output(0)
    check_run(label, codes[0], stdout, stderr, json_path, 2, "tcp")
    check(codes == [0, 0], f"{label}: exit codes {codes}; rank 1: {job.output(1)}")
    print(f"ok   {label}", flush=True)

    # Deep gradient compression through real processes: the ranks hold the same bits, and each
    # sent far fewer bytes than the payload.
    label = "standalone tcp np=2 replay resnet50 --compression dgc"
    json_path = os.path.join(directory, "dgc.jsonl")
    job = harness.Job(ringd, 2, ["bench", "replay", "--profile", "resnet50", "--steps", "1",
                                 "--warmup-steps", "1", "--baseline-iters", "1", "--check",
                                 "--compression", "dgc", "--timeout", "60", "--json", json_path])
    codes = job.wait(timeout=120)
    stdout, stderr = job.output(0)
    check(codes == [0, 0], f"{label}: exit codes {codes}\n{stdout}\n{stderr}\n{job.output(1)}")
    check("# check: 0 values that differ between ranks" in stdout, f"{label}:\n{stdout}")
    with open(json_path) as lines:
        result = json.loads(lines.read().splitlines()[-1])
    check(result["compression"] == "dgc" and result["wrong"] == 0, f"{label}: JSON {result}")
    sent = result["compressed_bytes_per_step"]
    check(0 < sent < result["bytes"] / 100, f"{label}: {sent} bytes sent of {result['bytes']}")
    print(f"ok   {label}: {sent / 2**20:.2f} MiB sent per rank of {result['bytes'] / 2**20:.1f}",
          flush=True)

    # The same total (so the one-buffer baseline agrees), but layer3 and layer4 differ.
    label = "standalone tcp np=2 replay, ranks disagree on layer3's size"
    other = list(sizes)
    other[3] += 1
    other[4] -= 1
    profiles = [profile, write_profile(directory, "other", other)]
    job = harness.Job(ringd, 2, ["bench", "replay", "--steps", "1", "--warmup-steps", "0",
                                 "--baseline-iters", "1", "--timeout", "30"],
                      extra_per_rank=lambda rank: ["--profile", profiles[rank]])
    codes = job.wait(timeout=90)
    check(codes == [1, 1], f"{label}: exit codes {codes}, expected 1 on both ranks")
    for rank in range(2):
        _, stderr = job.output(rank)
        for part in ["'layer3.weight' was submitted differently", "rank 0 submitted",
                     "rank 1 submitted", f"[{sizes[3]}]", f"[{other[3]}]", "mismatch"]:
            check(part in stderr, f"{label}: rank {rank}'s error lacks {part!r}:\n{stderr}")
    print(f"ok   {label}", flush=True)


if __name__ == "__main__":
    harness.main(test)
