"""ringd.torch and ringd's module-level API in this process, a world of one: argument checks,
dtypes, handles, the optimizer's wrapping. The multi-rank behaviour is in test_torch_*.py's
workers."""

import warnings

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

import ringd  # noqa: E402
import ringd.torch as hvd  # noqa: E402
from ringd.collectives import scatter_rows  # noqa: E402

LAUNCHER_VARIABLES = [
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "POD_NAME", "RINGD_REPLICAS",
]


@pytest.fixture
def world_of_one(monkeypatch):
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    hvd.init()
    yield
    hvd.shutdown()


def test_init_is_idempotent_and_shutdown_reopens(world_of_one):
    assert hvd.is_initialized() and ringd.is_initialized()
    hvd.init()
    assert (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()) == (0, 1, 0, 1)
    assert (hvd.cross_rank(), hvd.cross_size()) == (0, 1)
    hvd.shutdown()
    assert not hvd.is_initialized()
    with pytest.raises(hvd.InvalidArgumentError, match="init"):
        hvd.rank()
    hvd.init(comm=[0])  # every rank: accepted
    assert hvd.size() == 1


def test_init_refuses_a_subset_of_ranks(monkeypatch):
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(NotImplementedError, match="all 1 ranks"):
        hvd.init(comm=[0, 1])
    assert not hvd.is_initialized()


def test_calls_before_init_raise():
    assert not hvd.is_initialized()
    with pytest.raises(ValueError, match="not initialized"):
        hvd.allreduce(torch.ones(2))


@pytest.mark.parametrize("dtype", [torch.int16, torch.int8, torch.bool, torch.complex64,
                                   torch.float8_e4m3fn, torch.uint16])
@pytest.mark.parametrize("call", ["allreduce", "allreduce_", "broadcast_", "allgather"])
def test_unsupported_dtypes_are_type_errors_naming_the_dtype(world_of_one, dtype, call):
    tensor = torch.zeros(4, dtype=dtype)
    args = (tensor, 0) if call.startswith("broadcast") else (tensor,)
    with pytest.raises(TypeError, match=f"has dtype {dtype}, which ringd does not reduce"):
        getattr(hvd, call)(*args, name="bad")


def test_not_a_tensor_and_sparse_tensors_are_type_errors(world_of_one):
    with pytest.raises(TypeError, match="expected a torch.Tensor, got list"):
        hvd.allreduce_([1.0, 2.0])
    with pytest.raises(TypeError, match="dense tensors only"):
        hvd.allreduce(torch.eye(3).to_sparse())


def test_bad_ops_and_average_of_integers(world_of_one):
    with pytest.raises(hvd.InvalidArgumentError, match="median"):
        hvd.allreduce(torch.ones(2), op="median")
    with pytest.raises(hvd.InvalidArgumentError, match="avg"):
        hvd.allreduce(torch.ones(2, dtype=torch.int32))  # Average is the default
    assert torch.equal(hvd.allreduce(torch.ones(2, dtype=torch.int32), op=hvd.Sum),
                       torch.ones(2, dtype=torch.int32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.int32, torch.int64, torch.uint8])
def test_every_supported_dtype_in_a_world_of_one(world_of_one, dtype):
    tensor = torch.arange(6).reshape(2, 3).to(dtype)
    assert torch.equal(hvd.allreduce(tensor, op=hvd.Max), tensor)
    assert torch.equal(hvd.allgather(tensor), tensor)
    assert hvd.allgather(tensor).dtype == dtype
    assert hvd.broadcast_(tensor, 0) is tensor


def test_the_average_flag_is_deprecated_like_horovods(world_of_one):
    with pytest.warns(DeprecationWarning):
        assert torch.equal(hvd.allreduce(torch.ones(2), average=False), torch.ones(2))
    with pytest.raises(ValueError, match="either op or average"):
        hvd.allreduce(torch.ones(2), average=True, op=hvd.Sum)


def test_handles(world_of_one):
    handle = hvd.allreduce_async(torch.ones(2), name="h")
    assert isinstance(handle, int)
    assert torch.equal(hvd.synchronize(handle), torch.ones(2))
    with pytest.raises(ValueError, match="unknown or already synchronized"):
        hvd.synchronize(handle)
    with pytest.raises(ValueError, match="unknown or already synchronized"):
        hvd.poll(12345678)


def test_a_name_in_flight_twice_is_an_invalid_argument(monkeypatch):
    # In a world of one the engine finishes quickly; two ranks' names are checked in test_job.py.
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    hvd.init()
    try:
        first = hvd.allreduce_async(torch.ones(1 << 20), name="twice")
        try:
            second = hvd.allreduce_async(torch.ones(1 << 20), name="twice")
        except hvd.InvalidArgumentError as error:
            assert "already in flight" in str(error)
        else:
            hvd.synchronize(second)  # the first had finished already: allowed
        hvd.synchronize(first)
    finally:
        hvd.shutdown()


def test_compression_names_the_wire_format():
    assert hvd.Compression.none.wire is None
    assert hvd.Compression.fp16.wire == "fp16"
    assert hvd.Compression.bf16.wire == "bf16"
    tensor = torch.ones(2)
    assert hvd.Compression.fp16.compress(tensor) == (tensor, None)
    dgc = hvd.Compression.dgc(sparsity=0.99, warmup_epochs=2)
    assert dgc.wire == "dgc"
    assert dgc.settings() == {"sparsity": 0.99, "warmup": [0.75, 0.9375], "momentum": 0.9,
                              "clip_norm": 0.0, "sample_fraction": 0.0005,
                              "min_sparse_elements": 4096}
    assert dgc.with_momentum(0.5).settings()["momentum"] == 0.5
    # Passed without calling it (as one passes Compression.fp16): the default settings.
    from ringd.torch.compression import wire_and_python_compressor
    assert wire_and_python_compressor(hvd.Compression.dgc) == ("dgc", None)


@pytest.mark.parametrize("rows,size", [(0, 3), (1, 4), (7, 3), (8, 4), (9, 4)])
def test_scatter_rows_partition_the_rows(rows, size):
    spans = [scatter_rows(rows, rank, size) for rank in range(size)]
    assert spans[0][0] == 0 and spans[-1][1] == rows
    assert all(spans[i][1] == spans[i + 1][0] for i in range(size - 1))
    lengths = [stop - start for start, stop in spans]
    assert max(lengths) - min(lengths) <= 1 and lengths == sorted(lengths, reverse=True)


def test_distributed_optimizer_wraps_any_optimizer(world_of_one):
    model = torch.nn.Linear(3, 2)
    base = torch.optim.RMSprop(model.parameters(), lr=0.01)
    optimizer = hvd.DistributedOptimizer(base, named_parameters=model.named_parameters())
    assert isinstance(optimizer, torch.optim.RMSprop)
    assert type(optimizer).__name__ == "RMSprop"
    assert optimizer.param_groups is base.param_groups
    model(torch.ones(4, 3)).sum().backward()
    optimizer.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with optimizer.skip_synchronize():
            optimizer.step()
    assert not caught
    model(torch.ones(4, 3)).sum().backward()
    optimizer.synchronize()
    with pytest.warns(UserWarning, match="skip_synchronize"):
        optimizer.step()
    optimizer.remove_hooks()


def test_dgc_by_name_or_uncalled_moves_the_momentum_too(world_of_one):
    # Compression.dgc() does (test_torch_dgc.py); so must its default forms, or SGD's momentum
    # would be applied a second time on top of the compressor's.
    for compression in ("dgc", hvd.Compression.dgc):
        model = torch.nn.Linear(3, 2)
        base = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        optimizer = hvd.DistributedOptimizer(base, named_parameters=model.named_parameters(),
                                             compression=compression)
        assert base.param_groups[0]["momentum"] == 0.0, compression
        model(torch.ones(4, 3)).sum().backward()
        optimizer.step()
        optimizer.remove_hooks()


def test_distributed_optimizer_argument_checks(world_of_one):
    model = torch.nn.Linear(3, 2)
    with pytest.raises(ValueError, match="lacks 1"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[("weight", model.weight)])
    with pytest.raises(ValueError, match="pairs"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=list(model.parameters()))
    with pytest.raises(ValueError, match="backward_passes_per_step"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 backward_passes_per_step=0)
    with pytest.raises(ValueError, match="op=Average"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Sum,
                                 gradient_predivide_factor=2.0)


def test_numpy_api_in_a_world_of_one(world_of_one):
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    copy = ringd.allreduce(array)
    assert copy is not array and np.array_equal(copy, array)
    assert ringd.allreduce_(array, op=ringd.Max) is array
    gathered = ringd.allgather(array)
    assert gathered.dtype == np.float32 and np.array_equal(gathered, array)
    assert np.array_equal(ringd.broadcast(array, 0), array)
    assert np.array_equal(ringd.reducescatter(array), array)
    handle = ringd.allreduce_async_(array, name="np.handle")
    assert ringd.synchronize(handle) is array and ringd.poll(handle)
    with pytest.raises(TypeError, match="dtype int16"):
        ringd.allreduce(np.zeros(3, np.int16))
    ringd.barrier()
