"""ringd.torch.elastic (Horovod's elastic API) with real processes: 4 processes train; one is
SIGKILLed mid-batch; the other three roll back to their last commit, re-form (the same processes)
and go on; a fifth process started later joins at the next commit and receives the state; every
epoch's samples are trained on, committed, exactly once across the processes (up to the sampler's
padding), and every process ends with the same parameters."""
import collections
import json
import pathlib
import os
import socket
import subprocess
import sys
import time

import pytest

from worker_launcher import WORKERS, free_port

pytest.importorskip("torch")


def elastic_env(port, job_id, max_ranks):
    """An elastic job's environment (min 2 ranks), without a launcher's rank variables."""
    env = dict(os.environ, RINGD_ELASTIC_RENDEZVOUS=f"127.0.0.1:{port}",
               RINGD_ELASTIC_MIN_RANKS="2", RINGD_ELASTIC_MAX_RANKS=str(max_ranks),
               RINGD_JOB_ID=job_id, RINGD_JOB_SECRET="ringd-python-tests",
               RINGD_TIMEOUT="20", RINGD_IFACE="lo", OMP_NUM_THREADS="1",
               PYTHONDONTWRITEBYTECODE="1")
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "OMPI_COMM_WORLD_RANK"):
        env.pop(name, None)
    return env


def wait_for_store(port, explain):
    """Until the first process serves the rendezvous store (60 s)."""
    deadline = time.monotonic() + 60
    while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
        assert time.monotonic() < deadline, explain()
        time.sleep(0.05)


def start(out_dir, name, port, extra=()):
    log = open(out_dir / f"{name}.log", "w")  # noqa: SIM115 - closed by the test
    return subprocess.Popen([sys.executable, str(WORKERS / "elastic_worker.py"), str(out_dir),
                             name, *map(str, extra)], env=elastic_env(port, "torch-elastic-test", 4),
                            stdout=log, stderr=subprocess.STDOUT), log


def lines(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_lost_process_and_a_newcomer(tmp_path):
    port = free_port()
    procs = [start(tmp_path, "p0", port)]
    wait_for_store(port, lambda: (tmp_path / "p0.log").read_text())
    procs += [start(tmp_path, f"p{i}", port, [12] if i == 2 else []) for i in (1, 2, 3)]
    try:
        victim = procs[2][0]
        victim.wait(timeout=120)
        assert victim.returncode == -9
        # Once a survivor committed a batch as one of 3, start the newcomer.
        deadline = time.monotonic() + 60
        while not any(r["size"] == 3 for i in (0, 1, 3) for r in lines(tmp_path / f"p{i}.jsonl")):
            assert time.monotonic() < deadline, "the survivors never trained as 3"
            time.sleep(0.05)
        procs.append(start(tmp_path, "p4", port))
        codes = [p.wait(timeout=240) for p, _ in procs]
    finally:
        for p, log in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            log.close()
    logs = {i: (tmp_path / f"p{i}.log").read_text() for i in range(5)}
    assert codes == [0, 0, -9, 0, 0], logs
    finals = {i: json.loads((tmp_path / f"p{i}.json").read_text()) for i in (0, 1, 3, 4)}
    for i, final in finals.items():
        assert final["size"] == 4, (i, final)
        assert final["params"] == finals[0]["params"], f"process {i}'s parameters differ"
    # The first generation may start with fewer (min 2; the processes import torch at their own
    # pace) and grow; after the kill the survivors train as 3, then 4 with the newcomer.
    assert finals[4]["resets"] == 0 and finals[0]["resets"] >= 2, finals
    survivor_sizes = [r["size"] for r in lines(tmp_path / "p0.jsonl")]
    assert 3 in survivor_sizes and survivor_sizes[-1] == 4, survivor_sizes
    assert 4 not in survivor_sizes[survivor_sizes.index(3):][:1], survivor_sizes
    assert [r["size"] for r in lines(tmp_path / "p4.jsonl")] == [4] * len(lines(tmp_path /
                                                                                "p4.jsonl"))
    # Every epoch: each of the 240 samples trained on and committed, once (the sampler repeats
    # at most size - 1 samples to make the ranks' shares even after a re-forming).
    per_epoch = collections.defaultdict(collections.Counter)
    for i in range(5):
        for record in lines(tmp_path / f"p{i}.jsonl"):
            per_epoch[record["epoch"]].update(record["indices"])
    assert sorted(per_epoch) == list(range(6))
    for epoch, counts in per_epoch.items():
        assert set(counts) == set(range(240)), f"epoch {epoch}: samples skipped"
        repeated = sum(c - 1 for c in counts.values())
        assert repeated <= 6, f"epoch {epoch}: {repeated} samples trained twice"


EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "pytorch" / \
    "elastic_fashion_mnist.py"
FASHION_MNIST = pathlib.Path("/usr/share/datasets/fashion-mnist")


@pytest.mark.skipif(not FASHION_MNIST.is_dir(), reason="no Fashion-MNIST (dataset-fashion-mnist)")
def test_the_example_through_a_lost_process_and_a_newcomer(tmp_path):
    # examples/pytorch/elastic_fashion_mnist.py on 3 processes (min 2, max 3): after the first
    # epoch's line one is SIGKILLed, later a new one starts; the job ends at 3 ranks with every
    # epoch reported once and the CNN trained.
    port = free_port()
    env = elastic_env(port, "torch-elastic-example", 3)
    result = tmp_path / "result.json"
    command = [sys.executable, str(EXAMPLE), "--epochs", "3", "--limit-train", "4800",
               "--commit-every", "5", "--json", str(result)]
    procs = []

    def start(name):
        log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - closed below
        procs.append((subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT),
                      log, name))

    def outputs():
        return {name: (tmp_path / f"{name}.log").read_text() for _, _, name in procs}

    try:
        start("p0")
        wait_for_store(port, outputs)
        start("p1")
        start("p2")
        deadline = time.monotonic() + 240
        while not any("epoch 1/3" in text for text in outputs().values()):
            assert time.monotonic() < deadline and all(p.poll() is None for p, _, _ in procs), \
                outputs()
            time.sleep(0.1)
        procs[2][0].kill()
        procs[2][0].wait()
        time.sleep(2)
        start("p3")
        codes = [p.wait(timeout=400) for p, _, _ in procs]
    finally:
        for p, log, _ in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            log.close()
    assert codes == [0, 0, -9, 0], outputs()
    summary = json.loads(result.read_text())
    assert [e["epoch"] for e in summary["epochs"]] == [1, 2, 3], summary
    assert summary["ranks"] == 3, summary
    assert summary["epochs"][-1]["test_accuracy"] > 0.7, summary
