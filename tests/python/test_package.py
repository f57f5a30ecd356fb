"""The Python package ringd as pip installs it: import, version, errors, array checks.

Run against an installed wheel (not the source tree, which has no _core):
    python3 -m venv /tmp/venv-ringd && /tmp/venv-ringd/bin/pip install '.[test]'
    cd /tmp && /tmp/venv-ringd/bin/python -m pytest /work/main/tests/python -q
or against a build tree's package (cmake -DRINGD_BUILD_PYTHON=ON: build/python/ringd holds _core
and links to python/ringd/; libringd stays in build/lib), as the ctest python_tests does:
    TEST_RINGD_INPLACE=1 PYTHONPATH=build/python python -m pytest tests/python -q
"""

import os
import pathlib
import re

import pytest

import ringd
from ringd import _core

REPO = pathlib.Path(__file__).resolve().parents[2]

# Every ringd::ErrorCode (include/ringd/error.h), its short name and its Python class.
ERROR_CLASSES = {
    "invalid_argument": "InvalidArgumentError",
    "timeout": "RingdTimeoutError",
    "peer_lost": "PeerLostError",
    "protocol": "ProtocolError",
    "auth": "AuthError",
    "mismatch": "MismatchError",
    "io": "RingdIOError",
    "unavailable": "UnavailableError",
    "internal": "InternalError",
    "deadlock": "DeadlockError",
}


def cmake_project_version():
    text = (REPO / "CMakeLists.txt").read_text()
    return re.search(r"project\(ringd VERSION ([0-9.]+)", text).group(1)


def test_imports_the_installed_extension_not_the_source_tree():
    package = pathlib.Path(ringd.__file__).parent
    assert pathlib.Path(_core.__file__).parent == package
    assert package != REPO / "python" / "ringd"
    if os.environ.get("TEST_RINGD_INPLACE") == "1":
        return  # a build tree's package: _core finds libringd through its build RPATH
    assert [path.name for path in package.glob("libringd.so*")] == ["libringd.so.0.1"]


def test_version_is_the_cmake_project_version():
    assert ringd.__version__ == _core.__version__ == cmake_project_version()


def test_error_codes_match_error_h():
    header = (REPO / "include/ringd/error.h").read_text()
    enum = re.search(r"enum class ErrorCode \{(.*?)\};", header, re.S).group(1)
    codes = re.findall(r"\bk([A-Za-z]+),", enum)
    snake = {re.sub(r"(?<!^)([A-Z])", r"_\1", code).lower() for code in codes}
    assert snake == set(ERROR_CLASSES)
    assert set(_core._error_classes) == set(ERROR_CLASSES)


@pytest.mark.parametrize("code_name,class_name", sorted(ERROR_CLASSES.items()))
def test_every_error_code_raises_its_class_with_the_message(code_name, class_name):
    cls = getattr(ringd, class_name)
    assert cls is _core._error_classes[code_name]
    assert issubclass(cls, ringd.RingdError)
    assert issubclass(cls, RuntimeError)
    assert cls.code == code_name
    assert cls.__module__ == "ringd"
    message = f"rank 1: {code_name} went wrong; do this instead"
    with pytest.raises(cls) as info:
        _core._raise_for_test(code_name, message)
    assert type(info.value) is cls
    assert str(info.value) == message


def test_a_deadlock_error_is_a_mismatch_error():
    assert issubclass(ringd.DeadlockError, ringd.MismatchError)


def test_invalid_argument_is_also_a_value_error():
    assert issubclass(ringd.InvalidArgumentError, ValueError)
    with pytest.raises(ValueError, match="bad size"):
        _core._raise_for_test("invalid_argument", "bad size")
    for name in set(ERROR_CLASSES.values()) - {"InvalidArgumentError"}:
        assert not issubclass(getattr(ringd, name), ValueError)


def test_builtin_names_are_not_shadowed():
    assert ringd.RingdTimeoutError is not TimeoutError
    assert not hasattr(ringd, "TimeoutError")
    assert not hasattr(ringd, "IOError")


def test_unknown_code_name_is_an_invalid_argument_listing_the_codes():
    with pytest.raises(ringd.InvalidArgumentError, match="unknown error code 'nope'.*peer_lost"):
        _core._raise_for_test("nope", "x")


np = pytest.importorskip("numpy")

SUPPORTED = {
    "float32": "float",
    "float64": "double",
    "float16": "half",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
}


@pytest.mark.parametrize("dtype,ringd_name", sorted(SUPPORTED.items()))
def test_supported_dtypes_are_seen_in_place(dtype, ringd_name):
    array = np.zeros((3, 5), dtype=dtype)
    assert _core._tensor_for_test(array) == (ringd_name, (3, 5), array.nbytes)


def test_scalar_and_empty_arrays():
    assert _core._tensor_for_test(np.zeros((), np.float32)) == ("float", (), 4)
    assert _core._tensor_for_test(np.zeros((0, 4), np.int64)) == ("int64", (0, 4), 0)


@pytest.mark.parametrize("dtype", ["int16", "uint32", "int8", "bool", "complex64", "float128"])
def test_unsupported_dtype_is_a_type_error_naming_it(dtype):
    if not hasattr(np, dtype) and dtype != "bool":
        pytest.skip(f"numpy has no {dtype} here")
    array = np.zeros(4, dtype=dtype)
    # float128 is not even an array to DLPack or the buffer protocol: another message, same name.
    with pytest.raises(TypeError, match=f"dtype {dtype}\\b"):
        _core._tensor_for_test(array)


def test_not_an_array_is_a_type_error():
    with pytest.raises(TypeError, match="expected a NumPy array.*float32.*got list$"):
        _core._tensor_for_test([1.0, 2.0])


def test_non_contiguous_array_is_refused_not_copied():
    with pytest.raises(ringd.InvalidArgumentError, match="not C-contiguous"):
        _core._tensor_for_test(np.zeros((4, 4), np.float32)[:, ::2])
    with pytest.raises(ringd.InvalidArgumentError, match="not C-contiguous"):
        _core._tensor_for_test(np.zeros((4, 4), np.float32).T)
    # The stride of a dimension of extent 1 does not matter.
    base = np.zeros(4, np.float32)
    odd = np.lib.stride_tricks.as_strided(base, shape=(1, 4), strides=(1000, 4))
    assert _core._tensor_for_test(odd)[1] == (1, 4)


def test_read_only_array_is_refused():
    array = np.zeros(3, np.float64)
    array.flags.writeable = False
    with pytest.raises(ringd.InvalidArgumentError, match="read-only"):
        _core._tensor_for_test(array)


# ---- the package's layers: no module imports one that (directly or not) imports it back ----

PACKAGE_DIR = REPO / "python" / "ringd"


def _module_name(path):
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph():
    """module -> the ringd modules it imports, at module level or inside functions (a deferred
    import is still a cycle, only a hidden one). Packages' __init__ files re-export their
    modules, so they are left out as targets and as sources."""
    import ast
    modules = {_module_name(p): p for p in PACKAGE_DIR.rglob("*.py") if p.name != "__init__.py"}
    graph = {}
    for name, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            edges |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


def test_the_package_has_no_import_cycles():
    graph = _import_graph()
    assert "ringd.torch._submit" in graph and "ringd.torch.collectives" in graph, sorted(graph)
    state = {}

    def visit(module, path):
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                cycle = path[path.index(target):] + [target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, path + [target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


ENGINE_CALLS = {"allreduce", "grouped_allreduce", "broadcast", "allgather"}


def test_ringd_torch_reaches_the_engine_through_submit_only():
    """One way in: only ringd.torch._submit stages tensors and hands them to the job's engine
    (collectives, autograd_ops, the optimizer and the process group all submit through it)."""
    import ast
    offenders = []
    for path in sorted((PACKAGE_DIR / "torch").glob("*.py")):
        if path.name in ("_submit.py", "tensors.py"):  # the submitter, and staging's definition
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "stage":
                offenders.append(f"{path.name}:{node.lineno}: stage()")
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ENGINE_CALLS):
                continue
            receiver = node.func.value
            if isinstance(receiver, ast.Call):  # job().allreduce, _runtime.job().allreduce
                receiver = receiver.func
            name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(
                receiver, "id", "")
            if name == "job":
                offenders.append(f"{path.name}:{node.lineno}: job().{node.func.attr}()")
    assert not offenders, offenders


@pytest.mark.parametrize("module", sorted(_module_name(p) for p in PACKAGE_DIR.rglob("*.py")
                                          if p.name != "__init__.py"))
def test_each_module_imports_alone(module):
    import subprocess
    import sys
    if module.startswith("ringd.torch"):
        pytest.importorskip("torch")
    if module.startswith(("ringd.tensorflow", "ringd.keras")):
        pytest.importorskip("tensorflow")
    result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_the_tensorflow_op_sources_are_in_the_package():
    """ringd.tensorflow compiles them on the user's machine (ringd/tensorflow/_build.py): a wheel
    without them would install and then fail at the first import."""
    package = pathlib.Path(ringd.__file__).resolve().parent
    for name in ("ops.cc", "ringd_tf_bridge.h"):
        assert (package / "tensorflow" / name).is_file(), package


def test_libringd_dependencies_but_protobuf_load_without_the_deep_binding(tmp_path):
    # ringd/_native.py: _core reads as an ELF file whose NEEDED entries name libringd; libringd's
    # name protobuf (the one that must bind deep) and, where built with it, MPI, which must be
    # loaded first the usual way (MPI_Init aborted under mpirun in the TensorFlow image without).
    from ringd import _native

    needed, paths = _native._dynamic_entries(_core.__file__)
    libringd = next(n for n in needed if n.startswith("libringd."))
    located = [os.path.join(d, libringd) for d in [os.path.dirname(_core.__file__), *paths]
               if os.path.exists(os.path.join(d, libringd))]
    assert located, (needed, paths)
    dependencies, _ = _native._dynamic_entries(located[0])
    assert any(n.startswith("libprotobuf") for n in dependencies), dependencies
    mapped = pathlib.Path("/proc/self/maps").read_text()
    for soname in dependencies:
        if soname.startswith("libmpi."):
            assert "/" + soname.split(".so")[0] + ".so" in mapped, soname
    # Anything that is not a 64-bit ELF file: nothing, no error.
    (tmp_path / "text").write_text("not an ELF file")
    (tmp_path / "short").write_bytes(b"\x7fELF\x02\x01")
    for name in ("text", "short", "missing"):
        assert _native._dynamic_entries(str(tmp_path / name)) == ([], [])
