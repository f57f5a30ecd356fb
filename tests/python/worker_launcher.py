"""Starting N worker processes the way torchrun would (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; ringd's store at RINGD_RENDEZVOUS_PORT) and bounding
them in time: every run ends, killed if need be, and says why."""

import os
import pathlib
import socket
import subprocess
import sys
import time

WORKERS = pathlib.Path(__file__).resolve().parent / "workers"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Workers:
    """Started worker processes; wait() bounds them."""

    def __init__(self, script, size, out_dir, args=(), env=None):
        self.size = size
        self.out_dir = pathlib.Path(out_dir)
        self.logs = []
        self.procs = []
        base = dict(os.environ)
        base.update({
            "WORLD_SIZE": str(size), "LOCAL_WORLD_SIZE": str(size),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
            "RINGD_RENDEZVOUS_PORT": str(free_port()), "RINGD_IFACE": "lo",
            "RINGD_JOB_SECRET": "ringd-python-tests", "RINGD_TIMEOUT": "20",
            "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",  # ranks outnumber cores
        })
        base.update(env or {})
        for rank in range(size):
            rank_env = dict(base, RANK=str(rank), LOCAL_RANK=str(rank))
            log = open(self.out_dir / f"rank{rank}.log", "w+b")  # noqa: SIM115 - closed in wait
            self.logs.append(log)
            self.procs.append(subprocess.Popen(
                [sys.executable, str(WORKERS / script), str(self.out_dir), *map(str, args)],
                env=rank_env, stdout=log, stderr=subprocess.STDOUT))

    def wait(self, timeout):
        """Return codes by rank; kills what is left after `timeout` s (its code is then None)."""
        deadline = time.monotonic() + timeout
        codes = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(timeout=max(0.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for log in self.logs:
            log.close()
        return codes

    def output(self, rank):
        return (self.out_dir / f"rank{rank}.log").read_text(errors="replace")

    def describe(self, codes):
        return "\n".join(f"--- rank {rank} (exit {code}) ---\n{self.output(rank)[-3000:]}"
                         for rank, code in enumerate(codes))


def run_workers(script, size, out_dir, args=(), env=None, timeout=120):
    """Runs `script` on `size` ranks; asserts that every rank exited 0 (with their logs)."""
    workers = Workers(script, size, out_dir, args, env)
    codes = workers.wait(timeout)
    assert codes == [0] * size, workers.describe(codes)
    return workers


def checks_of_one_run(script, size, checks, timeout=120):
    """The fixture and tests of a module whose checks all come from one run of `script` on `size`
    ranks (workers/common.py's Checks): a module-scoped `results` fixture (every rank's record),
    a test that every rank ran every check of `checks`, and one test per check that it is "ok" on
    every rank. Bind them to the module's names:

        results, test_the_worker_ran_every_check, test_on_every_rank = checks_of_one_run(...)
    """
    import pytest
    from common import assert_ok_on_every_rank, read_results

    @pytest.fixture(scope="module")
    def results(tmp_path_factory):
        out_dir = tmp_path_factory.mktemp(pathlib.Path(script).stem)
        run_workers(script, size, out_dir, timeout=timeout)
        return read_results(out_dir, size)

    def test_the_worker_ran_every_check(results):
        for rank_results in results:
            assert sorted(rank_results) == sorted(checks)

    @pytest.mark.parametrize("check", checks)
    def test_on_every_rank(results, check):
        assert_ok_on_every_rank(results, check)

    return results, test_the_worker_ran_every_check, test_on_every_rank
