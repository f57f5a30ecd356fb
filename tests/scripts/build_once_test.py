#!/usr/bin/env python3
"""The README's two commands share one build: scripts/demo.sh and scripts/test.sh configure the
main build directory with the same cmake arguments (so the tests reuse the demo's build instead of
reconfiguring it, e.g. CUDA AUTO against CUDA OFF, and rebuilding everything).

Runs both scripts for real, with `cmake`, `ctest` and `mpirun` replaced on PATH by stubs that log
their arguments (and, for cmake, create the ringd binary the demo checks for), into a temporary
build directory; then compares the configure lines of the main directory.

  build_once_test.py REPO_ROOT
"""
import os
import shlex
import subprocess
import sys
import tempfile

STUB = """#!/bin/sh
# Logs its name and arguments, one line per call.
printf '%s' "$(basename "$0")" >> "$STUB_LOG"
for word in "$@"; do printf ' %s' "$word" >> "$STUB_LOG"; done
printf '\\n' >> "$STUB_LOG"
if [ "$(basename "$0")" = cmake ] && [ "$1" = --build ]; then
  mkdir -p "$2/bin"
  printf '#!/bin/sh\\nexit 0\\n' > "$2/bin/ringd"
  chmod +x "$2/bin/ringd"
fi
if [ "$(basename "$0")" = cmake ] && [ "$1" = --version ]; then echo "cmake version 3.25.1"; fi
exit 0
"""


def configure_lines(log, build_dir):
    """The cmake configure calls (-S . -B DIR ...) for build_dir, as argument lists."""
    lines = []
    for line in log.splitlines():
        words = shlex.split(line)
        if words[:1] == ["cmake"] and "-B" in words and words[words.index("-B") + 1] == build_dir:
            lines.append([w for w in words[1:] if w not in ("-G", "Ninja")])
    return lines


def run(repo, script, env, log_path):
    open(log_path, "w").close()
    result = subprocess.run([os.path.join(repo, "scripts", script)], cwd=repo, env=env,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    with open(log_path) as log:
        return result, log.read()


def main():
    repo = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="ringd-build-once-") as tmp:
        stubs = os.path.join(tmp, "bin")
        os.makedirs(stubs)
        for name in ("cmake", "ctest", "mpirun"):
            path = os.path.join(stubs, name)
            with open(path, "w") as stub:
                stub.write(STUB)
            os.chmod(path, 0o755)
        build_dir = os.path.join(tmp, "build")
        log_path = os.path.join(tmp, "calls.log")
        env = dict(os.environ, PATH=stubs + os.pathsep + os.environ["PATH"], STUB_LOG=log_path,
                   RINGD_BUILD_DIR=build_dir, RINGD_CUDA_BUILD_DIR=os.path.join(tmp, "build-cuda"),
                   RINGD_SKIP_CUDA_BUILD="1", RINGD_DEMO_DIR=os.path.join(tmp, "demo"),
                   # test.sh's Python arguments (-DRINGD_BUILD_PYTHON=ON, the venv's interpreter)
                   # add the extension's target to the demo's configuration and change no flag;
                   # without them here, no torch environment is set up for a stubbed build.
                   RINGD_SKIP_PYTHON="1",
                   # the fuzzers build in a directory of their own (build-fuzz, clang)
                   RINGD_SKIP_FUZZ="1")
        demo, demo_log = run(repo, "demo.sh", env, log_path)
        if demo.returncode != 0:
            print(f"FAIL: demo.sh with stubbed tools exited {demo.returncode}:\n{demo.stderr}")
            return 1
        tests, tests_log = run(repo, "test.sh", env, log_path)
        demo_configure = configure_lines(demo_log, build_dir)
        tests_configure = configure_lines(tests_log, build_dir)
        print(f"demo.sh configures {build_dir}: {demo_configure}")
        print(f"test.sh configures {build_dir}: {tests_configure}")
        failures = []
        if len(demo_configure) != 1 or len(tests_configure) != 1:
            failures.append("each script should configure the main build directory once")
        elif sorted(demo_configure[0]) != sorted(tests_configure[0]):
            failures.append("demo.sh and test.sh configure the main build differently: "
                            f"{demo_configure[0]} vs {tests_configure[0]}")
        if "mpirun" not in demo_log:
            failures.append("demo.sh did not reach its mpirun line")
        if not any(line.startswith("ctest") for line in tests_log.splitlines()):
            failures.append(f"test.sh did not reach ctest:\n{tests.stderr}")
        for failure in failures:
            print("FAIL: " + failure)
        if failures:
            return 1
        print("1 passed, 0 failed")
        return 0


if __name__ == "__main__":
    sys.exit(main())
