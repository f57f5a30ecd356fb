#!/usr/bin/env python3
"""Single-host MPI tests do not depend on the host's other interfaces (issue 35, item 11): every
mpirun the test suite starts keeps Open MPI's TCP BTL and its out-of-band channel on loopback
(a container bridge and a kubelet on the host once made every mpirun test hang until its timeout).
Checks the two places tests build mpirun command lines: tests/integration/harness.py's
MPIRUN_FLAGS and tests/mpi/CMakeLists.txt's add_test."""

import pathlib
import re
import sys

REPO = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
REQUIRED = [("btl_tcp_if_include", "lo"), ("oob_tcp_if_include", "lo")]


def pairs_in_python_list(text):
    flags = re.search(r"MPIRUN_FLAGS = \[(.*?)\]", text, re.S).group(1)
    words = re.findall(r'"([^"]*)"', flags)
    return {(words[i + 1], words[i + 2]) for i in range(len(words) - 2) if words[i] == "--mca"}


def pairs_in_cmake(text):
    command = re.search(r"add_test\(NAME .*?COMMAND (.*?)\)\n", text, re.S).group(1)
    words = command.split()
    return {(words[i + 1], words[i + 2]) for i in range(len(words) - 2) if words[i] == "--mca"}


def main():
    failures = []
    harness = (REPO / "tests/integration/harness.py").read_text()
    cmake = (REPO / "tests/mpi/CMakeLists.txt").read_text()
    for where, pairs in (("tests/integration/harness.py MPIRUN_FLAGS", pairs_in_python_list(harness)),
                         ("tests/mpi/CMakeLists.txt mpirun", pairs_in_cmake(cmake))):
        for name, value in REQUIRED:
            if (name, value) not in pairs:
                failures.append(f"{where} lacks --mca {name} {value}")
    for failure in failures:
        print(f"FAIL {failure}")
    if failures:
        return 1
    print("ok   every test mpirun keeps Open MPI on loopback (btl_tcp_if_include, "
          "oob_tcp_if_include)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
