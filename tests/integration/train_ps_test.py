#!/usr/bin/env python3
"""`ringd train --mode ps` and `ringd ps` as a user runs them, on small synthetic IDX files:

  1. allreduce reference: 3 inproc ranks, 30 steps -> parameters;
  2. ps, co-located (2 servers inside workers 0 and 1, greedy sharding): within 1e-4 relative;
  3. ps, servers on their own: two `ringd ps` processes, three standalone tcp workers
     (--rendezvous), round-robin: within 1e-4 relative, and both servers exit 0 afterwards;
  4. ps --ps-async runs to the end (1 worker: then it is the synchronous result exactly);
  5. a `ringd ps` killed (SIGKILL) mid-training: every worker exits 1 naming that server, no hang;
  6. a worker with the wrong job secret: exit 1, authentication error.

usage: train_ps_test.py RINGD"""
import array
import gzip
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time

import harness
from harness import check

STEPS = 30
LAYERS = "16,12,4"


def write_idx(path, dims, data, compress=False):
    header = bytes([0, 0, 8, len(dims)]) + b"".join(d.to_bytes(4, "big") for d in dims)
    with (gzip.open if compress else open)(path, "wb") as out:
        out.write(header + bytes(data))


def write_dataset(directory):
    """4x4 images, 4 classes decided by a fixed random linear teacher."""
    rng = random.Random(11)
    teacher = [[rng.uniform(-1, 1) for _ in range(16)] for _ in range(4)]
    pixels, labels = [], []
    for _ in range(768):
        image = [rng.randrange(256) for _ in range(16)]
        scores = [sum(w * p for w, p in zip(row, image)) for row in teacher]
        pixels += image
        labels.append(scores.index(max(scores)))
    write_idx(os.path.join(directory, "train-images-idx3-ubyte.gz"), [768, 4, 4], pixels, True)
    write_idx(os.path.join(directory, "train-labels-idx1-ubyte"), [768], labels)


def read_floats(path):
    values = array.array("f")
    with open(path, "rb") as f:
        values.frombytes(f.read())
    return values


def train_args(data, params_out, steps=STEPS, extra=()):
    return ["train", "--data", data, "--layers", LAYERS, "--batch-size", "8", "--lr", "0.05",
            "--warmup-steps", "5", "--momentum", "0.9", "--weight-decay", "0.0001", "--epochs",
            "100", "--max-steps", str(steps), "--no-eval", "--log-every", "10", "--params-out",
            params_out, "--timeout", "30", *extra]


def check_ok(label, code, stdout, stderr):
    check(code == 0, f"{label}: exit code {code}\nstdout:\n{stdout}\nstderr:\n{stderr}")


def compare(label, reference, path):
    got = read_floats(path)
    check(len(got) == len(reference) == 16 * 12 + 12 + 12 * 4 + 4,
          f"{label}: {len(got)} parameters, expected {len(reference)}")
    largest = max(abs(v) for v in reference)
    worst = max(abs(a - b) for a, b in zip(got, reference))
    check(worst <= 1e-4 * largest,
          f"{label}: max difference {worst} > 1e-4 x max |value| {largest}")
    return worst / largest


class Servers:
    """`ringd ps` processes on loopback, each reporting its address through --address-file."""

    def __init__(self, ringd, count, directory, env=None):
        self.processes = []
        self.addresses = []
        directory = tempfile.mkdtemp(prefix="servers-", dir=directory)
        for index in range(count):
            address_file = os.path.join(directory, f"ps{index}.address")
            err = open(os.path.join(directory, f"ps{index}.err"), "w+")
            process = subprocess.Popen(
                [ringd, "ps", "--listen", "127.0.0.1:0", "--address-file", address_file,
                 "--timeout", "20"], stdout=subprocess.DEVNULL, stderr=err,
                env=env or harness.environment())
            deadline = time.monotonic() + 30
            while not os.path.exists(address_file) and time.monotonic() < deadline:
                check(process.poll() is None, f"ringd ps {index} exited {process.returncode}")
                time.sleep(0.02)
            with open(address_file) as f:
                self.addresses.append(f.read().strip())
            self.processes.append((process, err))

    def wait(self, timeout):
        codes = []
        for process, err in self.processes:
            try:
                codes.append(process.wait(timeout=timeout))
            except subprocess.TimeoutExpired:
                self.kill()
                raise harness.Failure("a `ringd ps` is still running after its workers ended")
        return codes

    def stderr(self, index):
        err = self.processes[index][1]
        err.flush()
        with open(err.name) as f:
            return f.read()

    def kill(self):
        for process, _ in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()


def test(ringd, args):
    directory = tempfile.mkdtemp(prefix="ringd-train-ps-")
    servers = []
    try:
        data = os.path.join(directory, "data")
        os.makedirs(data)
        write_dataset(data)
        inproc3 = ["--transport", "inproc", "--ranks", "3"]

        out = os.path.join(directory, "allreduce.params")
        code, stdout, stderr, seconds = harness.run(
            [ringd, *train_args(data, out, extra=[*inproc3, "--mode", "allreduce"])],
            "allreduce", timeout=120)
        check_ok("allreduce", code, stdout, stderr)
        reference = read_floats(out)
        print(f"ok   allreduce reference, 3 ranks, {STEPS} steps, in {seconds:.1f} s", flush=True)

        out = os.path.join(directory, "colocated.params")
        code, stdout, stderr, seconds = harness.run(
            [ringd, *train_args(data, out, extra=[*inproc3, "--mode", "ps", "--ps-colocate", "2",
                                                  "--ps-sharding", "greedy"])],
            "ps co-located", timeout=120)
        check_ok("ps co-located", code, stdout, stderr)
        ratio = compare("ps co-located vs allreduce", reference, out)
        print(f"ok   ps, 2 co-located servers, greedy: max difference / max value = {ratio:.2g} "
              f"({seconds:.1f} s)", flush=True)

        own = Servers(ringd, 2, directory)
        servers.append(own)
        out = os.path.join(directory, "own.params")
        job = harness.Job(ringd, 3, train_args(data, out, extra=[
            "--transport", "tcp", "--mode", "ps", "--ps-servers", ",".join(own.addresses)]))
        codes = job.wait(120)
        check(codes == [0, 0, 0], f"ps own servers: exit codes {codes}: "
              + "\n".join(f"rank {r}: {job.output(r)}" for r in range(3)))
        ratio = compare("ps own servers vs allreduce", reference, out)
        server_codes = own.wait(30)
        check(server_codes == [0, 0], f"ringd ps exit codes {server_codes}: {own.stderr(0)} "
              f"{own.stderr(1)}")
        print(f"ok   ps, 2 `ringd ps` servers, 3 tcp workers: max difference / max value = "
              f"{ratio:.2g}; servers exited 0", flush=True)

        one = os.path.join(directory, "one-sync.params")
        one_async = os.path.join(directory, "one-async.params")
        for path, extra in ((one, []), (one_async, ["--ps-async"])):
            code, stdout, stderr, _ = harness.run(
                [ringd, *train_args(data, path, extra=["--transport", "inproc", "--ranks", "1",
                                                       "--mode", "ps", *extra])],
                f"ps {extra}", timeout=120)
            check_ok(f"ps {extra}", code, stdout, stderr)
        with open(one, "rb") as a, open(one_async, "rb") as b:
            check(a.read() == b.read(), "one worker: async and sync parameters differ")
        code, stdout, stderr, _ = harness.run(
            [ringd, *train_args(data, one_async, extra=[*inproc3, "--mode", "ps", "--ps-async"])],
            "ps async 3 workers", timeout=120)
        check_ok("ps async 3 workers", code, stdout, stderr)
        check(all(v == v for v in read_floats(one_async)), "async run: NaN parameters")
        print("ok   ps --ps-async: 1 worker equals sync bitwise; 3 workers run to the end",
              flush=True)

        doomed = Servers(ringd, 2, directory)
        servers.append(doomed)
        victim = doomed.addresses[1]
        job = harness.Job(ringd, 2, train_args(data, os.path.join(directory, "dead.params"),
                                               steps=100000, extra=[
            "--transport", "tcp", "--mode", "ps", "--ps-servers", ",".join(doomed.addresses),
            "--throttle-ms", "20"]))
        job.wait_for_stdout(0, "step 10", 60)
        doomed.processes[1][0].send_signal(signal.SIGKILL)
        started = time.monotonic()
        codes = job.wait(60)
        outputs = [job.output(r) for r in range(2)]
        check(codes == [1, 1], f"dead server: exit codes {codes}: {outputs}")
        for rank, (_, err) in enumerate(outputs):
            check(f"parameter server 1 ({victim})" in err,
                  f"dead server: rank {rank} does not name parameter server 1 ({victim}):\n{err}")
        doomed.wait(30)
        print(f"ok   `ringd ps` killed mid-training: both workers exit 1 naming it, "
              f"{time.monotonic() - started:.1f} s after the kill", flush=True)

        guarded = Servers(ringd, 1, directory, env=harness.environment(RINGD_JOB_SECRET="right"))
        servers.append(guarded)
        code, stdout, stderr, _ = harness.run(
            [ringd, *train_args(data, os.path.join(directory, "x.params"), extra=[
                "--transport", "inproc", "--ranks", "1", "--mode", "ps", "--ps-servers",
                guarded.addresses[0]])],
            "wrong secret", timeout=60, env=harness.environment(RINGD_JOB_SECRET="wrong"))
        check(code == 1 and "authentication" in stderr,
              f"wrong secret: exit code {code}, stderr:\n{stderr}")
        print("ok   a worker with the wrong job secret is refused", flush=True)
    finally:
        for group in servers:
            group.kill()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    harness.main(test)
