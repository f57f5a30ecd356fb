"""ringd.Job from Python: a world of one, and two ranks as threads of this process over tcp on
127.0.0.1 (opening a Job releases the GIL, so the ranks meet). Run like test_package.py."""

import gc
import os
import signal
import socket
import threading
import weakref

import pytest

import ringd

np = pytest.importorskip("numpy")

# The environment variables a Job reads to find its place (include/ringd/job.h).
JOB_VARIABLES = [
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "POD_NAME", "RINGD_REPLICAS",
]


@pytest.fixture(autouse=True)
def no_launcher_environment(monkeypatch):
    for name in JOB_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def open_jobs(size):
    """One Job per rank, opened by one thread each; returns them in rank order."""
    port = free_port()
    jobs = [None] * size
    errors = [None] * size

    def open_rank(rank):
        try:
            jobs[rank] = ringd.Job(rank=rank, size=size, rendezvous=f"127.0.0.1:{port}",
                                   transport="tcp", timeout_s=20, interface="lo")
        except BaseException as error:  # noqa: BLE001 - reported below
            errors[rank] = error

    threads = [threading.Thread(target=open_rank, args=(rank,)) for rank in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == [None] * size
    return jobs


def on_every_rank(jobs, body):
    """body(rank, job) on one thread per rank; returns the results, raises the first error."""
    results = [None] * len(jobs)
    errors = [None] * len(jobs)

    def run(rank):
        try:
            results[rank] = body(rank, jobs[rank])
        except BaseException as error:  # noqa: BLE001 - rethrown below
            errors[rank] = error

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    for error in errors:
        if error is not None:
            raise error
    return results


@pytest.fixture
def two_ranks():
    jobs = open_jobs(2)
    yield jobs
    on_every_rank(jobs, lambda rank, job: job.shutdown())


def test_a_world_of_one():
    job = ringd.Job()
    assert (job.rank, job.size, job.local_rank, job.local_size) == (0, 1, 0, 1)
    assert (job.cross_rank, job.cross_size) == (0, 1)
    assert job.source == "single"
    assert "rank=0, size=1" in repr(job)
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    handle = job.allreduce("x", array, "sum")
    assert handle.name == "x"
    assert handle.wait() is array
    assert handle.done()
    np.testing.assert_array_equal(array, np.arange(6).reshape(2, 3))
    job.shutdown()
    job.shutdown()  # idempotent
    with pytest.raises(ringd.InvalidArgumentError):
        job.allreduce("x", array, "sum")


def test_bad_arguments_raise_before_anything_is_submitted():
    job = ringd.Job()
    with pytest.raises(TypeError, match="dtype int16"):
        job.allreduce("x", np.zeros(3, np.int16), "sum")
    with pytest.raises(ringd.InvalidArgumentError):
        job.allreduce("x", np.zeros(3, np.float32), "median")
    with pytest.raises(ringd.InvalidArgumentError, match="not C-contiguous"):
        job.allreduce("x", np.zeros((4, 4), np.float32)[:, ::2], "sum")
    job.shutdown()
    with pytest.raises(ringd.InvalidArgumentError, match="timeout_s"):
        ringd.Job(timeout_s=-1)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "uint8"])
def test_two_ranks_sum_in_place(two_ranks, dtype):
    def body(rank, job):
        array = np.full((3, 7), rank + 1, dtype=dtype)
        assert job.allreduce(f"t.{dtype}", array, "sum").wait() is array
        return array

    for result in on_every_rank(two_ranks, body):
        np.testing.assert_array_equal(result, np.full((3, 7), 3, dtype=dtype))


def test_two_ranks_that_disagree_get_a_mismatch_error(two_ranks):
    def body(rank, job):
        with pytest.raises(ringd.MismatchError) as info:
            job.allreduce("grad", np.zeros(4 + rank, np.float32), "sum").wait()
        return str(info.value)

    for message in on_every_rank(two_ranks, body):
        assert "grad" in message


def test_ctrl_c_interrupts_a_wait_and_the_operation_goes_on(two_ranks):
    rank0, rank1 = two_ranks
    array0 = np.ones(5, np.float64)
    array1 = np.full(5, 2.0)
    handle = rank0.allreduce("late", array0, "sum")  # rank 1 has not submitted it yet
    interrupt = threading.Timer(0.3, os.kill, args=(os.getpid(), signal.SIGINT))
    # Should the wait miss the signal, rank 1's submission ends it after 5 s: no hang, a failure.
    rescue = threading.Timer(5.0, rank1.allreduce, args=("late", array1, "sum"))
    interrupt.start()
    rescue.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            handle.wait()
    finally:
        interrupt.join()
        rescue.cancel()
    assert not handle.done()
    rank1.allreduce("late", array1, "sum").wait()
    assert handle.wait() is array0
    np.testing.assert_array_equal(array0, np.full(5, 3.0))


def test_a_submitted_array_lives_until_its_operation_is_done(two_ranks):
    rank0, rank1 = two_ranks
    array0 = np.ones(1 << 16, np.float32)
    alive = weakref.ref(array0)
    rank0.allreduce("dropped", array0, "sum")
    del array0  # and the handle: the job still holds the array
    gc.collect()
    assert alive() is not None
    array1 = np.ones(1 << 16, np.float32)
    rank1.allreduce("dropped", array1, "sum").wait()
    np.testing.assert_array_equal(array1, np.full(1 << 16, 2.0, np.float32))
    for _ in range(2):  # rank 0's next submissions let go of the finished operations' arrays
        on_every_rank(two_ranks, lambda rank, job: job.allreduce("sync", np.zeros(1), "sum").wait())
    gc.collect()
    assert alive() is None


def test_two_ranks_broadcast_allgather_and_a_group(two_ranks):
    def body(rank, job):
        array = np.full(3, rank + 1.0)
        assert job.broadcast("b", array, 1).wait() is array
        rows = np.full((rank + 1, 2), rank, np.int64)
        gathered = job.allgather("g", rows)
        assert gathered.kind == "allgather"
        flat = gathered.output()
        assert flat.dtype == np.uint8
        assert gathered.output_shape() == (3, 2)
        np.testing.assert_array_equal(rows, np.full((rank + 1, 2), rank))  # input untouched
        group = job.grouped_allreduce("grp", ["grp.a", "grp.b"],
                                      [np.ones(2, np.float32), np.full(3, rank, np.int32)], "sum")
        return array, flat.view(np.int64).reshape(3, 2), [h.wait() for h in group]

    for array, gathered, group in on_every_rank(two_ranks, body):
        np.testing.assert_array_equal(array, np.full(3, 2.0))
        np.testing.assert_array_equal(gathered, [[0, 0], [1, 1], [1, 1]])
        np.testing.assert_array_equal(group[0], np.full(2, 2.0))
        np.testing.assert_array_equal(group[1], np.full(3, 1))


def test_two_ranks_fp16_compression_rounds_float32(two_ranks):
    def body(rank, job):
        array = np.full(4, 1.0 + 2.0**-20, np.float32)
        job.allreduce("c", array, "sum", compression="fp16").wait()
        return array

    for array in on_every_rank(two_ranks, body):
        np.testing.assert_array_equal(array, np.full(4, 2.0, np.float32))  # the 2^-20 is lost


def test_collective_argument_checks():
    job = ringd.Job()
    with pytest.raises(ringd.InvalidArgumentError, match="zip"):
        job.allreduce("x", np.zeros(3, np.float32), "sum", compression="zip")
    with pytest.raises(ringd.InvalidArgumentError, match="root 3"):
        job.broadcast("x", np.zeros(3, np.float32), 3)
    with pytest.raises(ringd.InvalidArgumentError, match="at least one dimension"):
        job.allgather("x", np.zeros((), np.float32))
    with pytest.raises(ringd.InvalidArgumentError, match="2 names for 1 arrays"):
        job.grouped_allreduce("g", ["a", "b"], [np.zeros(1)], "sum")
    with pytest.raises(TypeError, match="dtype int16"):  # nothing of the group is submitted
        job.grouped_allreduce("g", ["a", "b"], [np.zeros(1), np.zeros(1, np.int16)], "sum")
    handle = job.allreduce("a", np.zeros(1), "sum")
    with pytest.raises(ringd.InvalidArgumentError, match="only an allgather has an output"):
        handle.output()
    job.shutdown()
