"""Lets the tests import the helpers beside them (worker_launcher) and the workers' own
(workers/common.py)."""

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
for path in (HERE, HERE / "workers"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
