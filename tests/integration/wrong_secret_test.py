#!/usr/bin/env python3
"""(d) One rank with a different RINGD_JOB_SECRET: the job fails with an authentication error, and
no rank hangs (all end within 2x --timeout)."""
import re
import time

import harness
from harness import check

TIMEOUT_S = 5


def test(ringd, args):
    ranks, intruder = 3, 2
    started = time.monotonic()
    job = harness.Job(ringd, ranks, ["bench", "allreduce", "--check", "-b", "4K", "-e", "64K",
                                     "--iters", "2", "--timeout", str(TIMEOUT_S)],
                      env_per_rank={intruder: {"RINGD_JOB_SECRET": "not-the-job-secret"}})
    codes = job.wait(timeout=2 * TIMEOUT_S + 10)
    seconds = time.monotonic() - started
    outputs = {rank: job.output(rank) for rank in range(ranks)}
    check(all(code != 0 for code in codes), f"exit codes {codes}: some rank succeeded; {outputs}")
    check(seconds <= 2 * TIMEOUT_S + 5, f"the job took {seconds:.1f} s to fail")
    errors = "\n".join(err for _, err in outputs.values())
    check(re.search(r"authenticat", errors, re.I) is not None,
          f"no authentication error reported: {outputs}")
    # Rank 0 serves the store that refused the intruder: its own error says so, not only a
    # timeout (issue 35, item 10).
    check("failed the job-secret handshake" in outputs[0][1],
          f"rank 0 does not say that a connection failed the job-secret handshake: {outputs[0]}")
    for rank, (_, err) in outputs.items():
        check("ringd: error:" in err, f"rank {rank} has no 'ringd: error:' line: {err}")
        print(f"ok   rank {rank} exit {codes[rank]}: {err.strip().splitlines()[-1]}")
    print(f"ok   job failed in {seconds:.1f} s")


if __name__ == "__main__":
    harness.main(test)
