"""What every worker shares: its output directory and a record of named checks, written as
rank<N>.json (check name -> "ok" or what went wrong) for the test to read."""

import json
import pathlib
import sys
import time
import traceback


class Checks:
    def __init__(self, rank):
        self.rank = rank
        self.out_dir = pathlib.Path(sys.argv[1])
        self.results = {}

    def run(self, name, body, *args, **kwargs):
        """Runs body(*args, **kwargs); records "ok" or the exception with its traceback."""
        start = time.monotonic()
        try:
            body(*args, **kwargs)
            self.results[name] = "ok"
        except Exception:  # noqa: BLE001 - the test reports it
            self.results[name] = traceback.format_exc()
        print(f"rank {self.rank}: {name}: {time.monotonic() - start:.2f} s", flush=True)

    def write(self):
        path = self.out_dir / f"rank{self.rank}.json"
        path.write_text(json.dumps(self.results, indent=1))


def read_results(out_dir, size):
    return [json.loads((pathlib.Path(out_dir) / f"rank{rank}.json").read_text())
            for rank in range(size)]


def assert_ok_on_every_rank(results, check):
    """Every rank's result of `check` is "ok"; otherwise each failing rank's text, named."""
    failures = {rank: rank_results.get(check) for rank, rank_results in enumerate(results)
                if rank_results.get(check) != "ok"}
    assert not failures, "\n".join(f"rank {rank}:\n{text}" for rank, text in failures.items())
