"""ringd's TensorFlow ops (ops.cc beside this file): compiled once against the installed
TensorFlow's C API headers, cached, loaded and connected to ringd._core.

Why compiled here and not shipped: ops.cc uses only TensorFlow's C API (tensorflow/c/kernels.h,
ops.h), whose ABI TensorFlow keeps stable, and ringd's own C table (ringd_tf_bridge.h), so the same
source builds against every TensorFlow 2 that has that API, without a ringd release per TensorFlow
release (Horovod's native build against TensorFlow's C++ ABI is what broke on each upgrade). The
library is cached per TensorFlow version and source hash under $RINGD_CACHE_DIR (default
~/.cache/ringd); a new TensorFlow costs one compile (about a second), not a reinstall. Ranks that
start at once on one machine compile once (a file lock). RINGD_TF_OPS=path loads a library built
beforehand (an image without a compiler: build it in the image, `python -m
ringd.tensorflow._build`).
"""

import ctypes
import fcntl
import hashlib
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile

import tensorflow as tf

from ringd import _core
from ringd._core import UnavailableError

HERE = pathlib.Path(__file__).resolve().parent
SOURCES = (HERE / "ops.cc", HERE / "ringd_tf_bridge.h")


def cache_dir():
    base = os.environ.get("RINGD_CACHE_DIR")
    if not base:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                            "ringd")
    return pathlib.Path(base) / "tf-ops"


def _compile_command(output):
    compiler = os.environ.get("CXX", "c++")
    return [compiler, "-shared", "-fPIC", "-O2", "-fvisibility=hidden",
            *tf.sysconfig.get_compile_flags(), f"-I{HERE}", str(HERE / "ops.cc"), "-o",
            str(output), *tf.sysconfig.get_link_flags()]


def library_path():
    """The cached library for this TensorFlow and this source, compiled first if missing."""
    given = os.environ.get("RINGD_TF_OPS")
    if given:
        return pathlib.Path(given)
    digest = hashlib.sha256()
    for source in SOURCES:
        digest.update(source.read_bytes())
    digest.update(" ".join(_compile_command("out")).encode())
    directory = cache_dir()
    path = directory / f"ringd_tf_ops-tf{tf.__version__}-{digest.hexdigest()[:16]}.so"
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other ranks of this machine wait for one compile
        if not path.exists():
            _compile(path)
    return path


def _compile(path):
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        built = pathlib.Path(scratch) / path.name
        command = _compile_command(built)
        try:
            result = subprocess.run(command, capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise UnavailableError(
                f"ringd.tensorflow: compiling its ops against TensorFlow {tf.__version__} needs a "
                f"C++ compiler, and {command[0]!r} was not found (Debian: apt-get install g++; or "
                "set CXX, or RINGD_TF_OPS to a library built with `python -m "
                "ringd.tensorflow.build` where one is)") from None
        if result.returncode != 0:
            raise UnavailableError(
                f"ringd.tensorflow: compiling its ops against TensorFlow {tf.__version__} failed "
                f"({shlex.join(command)}):\n{result.stderr[-4000:]}")
        os.replace(built, path)


def load():
    """The ops module (ringd_submit, ringd_wait), connected to ringd._core's engine."""
    path = library_path()
    module = tf.load_op_library(str(path))
    # The same file is loaded once; ctypes reaches its ringd_tf_connect.
    status = ctypes.CDLL(str(path)).ringd_tf_connect(ctypes.c_void_p(_core._tf_bridge_address()))
    if status != 0:
        raise UnavailableError(f"ringd.tensorflow: {path} speaks another bridge version than "
                               f"ringd._core ({status}); remove it to rebuild")
    return module


if __name__ == "__main__":
    print(library_path())
    sys.exit(0)
