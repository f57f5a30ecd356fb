#!/usr/bin/env python3
"""(e) 1 MB of random bytes sent to a rank's listening port (and to the rendezvous port) while a
tcp job runs: the intruder is dropped, the job completes with #wrong 0."""
import os
import socket

import harness
from harness import check


def send_garbage(port, size=1 << 20):
    payload = os.urandom(size)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            s.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the rank hung up on us mid-stream: that is the point


def test(ringd, args):
    ranks, low, high, factor = 3, 1 << 20, 64 << 20, 4
    ports = [harness.free_port() for _ in range(ranks)]
    job = harness.Job(ringd, ranks, ["bench", "allreduce", "--check", "-b", str(low), "-e",
                                     str(high), "-f", str(factor), "--iters", "5", "--warmup",
                                     "1", "--timeout", "60"],
                      extra_per_rank=lambda rank: ["--tcp-port", str(ports[rank])])
    try:
        job.wait_for_stdout(0, "#wrong", timeout=60)  # connected, sweep starting
        send_garbage(ports[1])
        send_garbage(job.port)  # rank 0's rendezvous store
        check(all(p.poll() is None for p, _, _ in job.processes),
              "the job ended before the garbage arrived; make it longer")
        codes = job.wait(timeout=180)
    finally:
        job.kill_all()
    outputs = [job.output(rank) for rank in range(ranks)]
    check(codes == [0] * ranks, f"exit codes {codes}: {outputs}")
    harness.check_bench_output("garbage", outputs[0][0], harness.sweep_rows(low, high, factor))
    print("ok   job completed with #wrong 0 after 2 x 1 MB of random bytes")


if __name__ == "__main__":
    harness.main(test)
