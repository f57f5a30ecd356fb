#!/usr/bin/env python3
"""scripts/gpu_check.sh without a GPU and without a real CUDA build.

  1. No GPU (a `nvidia-smi` that fails as it does without a driver; and, where the host has no
     nvidia-smi at all, the real PATH): exit 77 within seconds, the plain "no NVIDIA GPU visible"
     message, cmake never called, no report written.
  2. Two fake GPUs, every tool stubbed (nvidia-smi, nvcc, cmake, ctest; cmake's build makes a fake
     `ringd` that prints bench headers with its device kind and writes JSON and parameters): exit 0,
     the CUDA directory configured exactly as scripts/test.sh configures it (test.sh run with the
     same stubs), the bench run on 2 devices per node, the engine over the NCCL group
     (`bench replay --gpus --check`) for both hierarchies, `train --gpus` on 2 nodes x 2 GPUs and
     the same on CPU devices, PASS for every step in the report.
  3. The same with a failing ctest, wrong values in one NCCL sweep and in one replay, cuBLAS
     parameters far from OpenBLAS's and `train --gpus` parameters far from the CPU devices':
     exit 1, FAIL for those five steps in the report, PASS for the others.
  4. One fake GPU: --local-devices 1 with an explicit hierarchy, and the report says one GPU only.
  5. --build-only without a GPU: builds (stubbed), CPU sweeps and OpenBLAS run, GPU steps SKIP.
  6. --skip-build on a machine with no nvcc, given case 2's build directory: installs and compiles
     nothing (no install_deps.sh, no cmake), runs every check on the GPUs, trains on
     RINGD_GPU_CHECK_DATA, and reads a newer ctest's summary; without a build directory it fails naming the missing ringd.

  gpu_check_test.py REPO_ROOT
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

LOGGING_STUB = """#!/bin/sh
printf '%s' "$(basename "$0")" >> "$STUB_LOG"
for word in "$@"; do printf ' %s' "$word" >> "$STUB_LOG"; done
printf '\\n' >> "$STUB_LOG"
"""

CMAKE = LOGGING_STUB + """
if [ "$1" = --version ]; then echo "cmake version 3.25.1"; exit 0; fi
if [ "$1" = --build ]; then
  mkdir -p "$2/bin" "$2/generated/ringd"
  cp "$FAKE_RINGD" "$2/bin/ringd"
  chmod +x "$2/bin/ringd"
  printf '#define RINGD_HAVE_CUDA 1\\n#define RINGD_HAVE_NCCL 1\\n#define RINGD_HAVE_CUBLAS 1\\n' \\
    > "$2/generated/ringd/config.h"
  exit 0
fi
# configure: -S . -B DIR ...
while [ $# -gt 0 ]; do
  if [ "$1" = -B ]; then mkdir -p "$2"; build="$2"; fi
  shift
done
printf 'RINGD_NCCL_INCLUDE:PATH=%s\\nRINGD_NCCL_LIBRARY:FILEPATH=%s/libnccl.so\\n' \\
  "$FAKE_NCCL_DIR" "$FAKE_NCCL_DIR" > "$build/CMakeCache.txt"
exit 0
"""

CTEST = LOGGING_STUB + """
if [ "${FAKE_CTEST_RC:-0}" != 0 ]; then
  echo "The following tests FAILED:"
  echo "50% tests passed, 2 tests failed out of 4"
  exit "$FAKE_CTEST_RC"
fi
if [ -n "${FAKE_CTEST_NEW_SUMMARY:-}" ]; then  # a newer ctest's summary when none failed
  echo "100% tests passed out of 4"
else
  echo "100% tests passed, 0 tests failed out of 4"
fi
"""

NVCC = """#!/bin/sh
echo "Cuda compilation tools, release 13.0, V13.0.88"
"""

NVIDIA_SMI = """#!/bin/sh
if [ -n "${FAKE_SMI_FAIL:-}" ]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
  exit 9
fi
case "$*" in
  *--query-gpu*) printf '%b' "$FAKE_GPUS" ;;
  *) echo "| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0 |" ;;
esac
"""

# The CUDA build's ringd, faked: bench prints nccl-tests' header with the device kind (cpu where
# CUDA_VISIBLE_DEVICES=-1 hides the GPUs) and JSON rows; train writes its summary and parameters.
FAKE_RINGD = r"""#!/usr/bin/env python3
import json, os, struct, sys
args = sys.argv[1:]
with open(os.environ["STUB_LOG"], "a") as log:
    log.write("ringd " + " ".join(args) + " CUDA_VISIBLE_DEVICES="
              + os.environ.get("CUDA_VISIBLE_DEVICES", "") + "\n")
def flag(name, default=None):
    return args[args.index(name) + 1] if name in args else default
if args[:2] == ["bench", "replay"]:
    hierarchy = flag("--hierarchy")
    wrong = 5 if os.environ.get("FAKE_REPLAY_WRONG") == hierarchy else 0
    kind = "CPU" if os.environ.get("CUDA_VISIBLE_DEVICES") == "-1" else "GPU"
    print(f"# ringd bench replay: profile resnet50 (161 tensors, 97.5 MiB float per step), "
          f"{flag('--ranks')} nodes x {flag('--local-devices')} {kind} devices")
    with open(flag("--json"), "a") as out:
        out.write(json.dumps({"profile": "resnet50", "one_buffer_ms": 20.0, "wrong": wrong,
                              "steps": [{"step_ms": 25.0}] * int(flag("--steps"))}) + "\n")
    if wrong:
        sys.stderr.write(f"ringd: error: --check found {wrong} wrong values\n")
        sys.exit(1)
elif args[0] == "bench":
    kind = "cpu" if os.environ.get("CUDA_VISIBLE_DEVICES") == "-1" else "nccl"
    nodes, hierarchy = flag("--ranks"), flag("--hierarchy")
    bad = os.environ.get("FAKE_BENCH_WRONG") == f"{kind}:{nodes}:{hierarchy}"
    print(f"# nodes: {nodes}  local devices: {flag('--local-devices')} ({kind})  hierarchy: "
          f"{hierarchy}  (busbw: per device)")
    with open(flag("--json"), "a") as out:
        for size in (4096, 65536):
            wrong = 3 if bad and size == 65536 else 0
            print(f"{size:12d}  {size // 4:12d}     float     sum      -1    10.00    1.000    1.500"
                  f"  {wrong:6d}    1.000")
            out.write(json.dumps({"bytes": size, "time_us": 10.0, "busbw_GBps": 1.5,
                                  "wrong": wrong}) + "\n")
    print(f"# Out of bounds values : {3 if bad else 0} {'FAILED' if bad else 'OK'}")
    if bad:
        sys.stderr.write("ringd: error: --check found 3 wrong values\n")
        sys.exit(1)
elif args[0] == "train":
    blas = flag("--blas")
    gpus = "--gpus" in args
    if "--hierarchy" in args and flag("--local-devices", "1") == "1" and not gpus:
        sys.stderr.write("ringd train: --hierarchy: needs --local-devices > 1\n")
        sys.exit(2)
    drift = float(os.environ.get("FAKE_GPUS_DRIFT" if gpus else "FAKE_TRAIN_DRIFT", "0")) \
        if blas == "cublas" else 0.0
    group = "nccl" if gpus else "cpu" if "--local-devices" in args else None
    with open(flag("--json"), "w") as out:
        json.dump({"blas": blas, "local_group": group, "samples_per_second": 1000.0,
                   "last_loss": 0.5, "test_accuracy": 0.8}, out)
    with open(flag("--params-out"), "wb") as out:
        out.write(struct.pack("<4f", *(v * (1 + drift) for v in (0.5, -0.25, 1.0, 2.0))))
"""


def write(path, text, mode=0o755):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


class Harness:
    def __init__(self, repo, tmp):
        self.repo, self.tmp = repo, tmp
        self.stubs = os.path.join(tmp, "bin")
        os.makedirs(self.stubs)
        for name, text in (("cmake", CMAKE), ("ctest", CTEST), ("nvidia-smi", NVIDIA_SMI)):
            write(os.path.join(self.stubs, name), text)
        self.nvcc = os.path.join(tmp, "nvcc")
        write(self.nvcc, NVCC)
        self.fake_ringd = os.path.join(tmp, "fake_ringd")
        write(self.fake_ringd, FAKE_RINGD)
        self.nccl_dir = os.path.join(tmp, "nccl")
        os.makedirs(self.nccl_dir)
        write(os.path.join(self.nccl_dir, "nccl.h"),
              "#define NCCL_MAJOR 2\n#define NCCL_MINOR 99\n#define NCCL_PATCH 1\n", 0o644)
        self.log = os.path.join(tmp, "calls.log")
        self.runs = 0

    def run(self, *args, script="gpu_check.sh", gpus=2, path=None, reuse=None, **extra):
        """reuse=N: the build directory of run N instead of a fresh one."""
        self.runs += 1
        build = os.path.join(self.tmp, f"run{reuse or self.runs}")
        self.report = os.path.join(build, "build-cuda", "gpu_check.txt")
        open(self.log, "w").close()
        env = dict(os.environ, PATH=path or self.stubs + os.pathsep + os.environ["PATH"],
                   STUB_LOG=self.log, CUDACXX=self.nvcc, FAKE_RINGD=self.fake_ringd,
                   FAKE_NCCL_DIR=self.nccl_dir, FAKE_GPUS="".join(
                       f"{i}, NVIDIA H100 80GB HBM3, 580.95.05, 81559 MiB\\n" for i in range(gpus)),
                   RINGD_BUILD_DIR=os.path.join(build, "build"),
                   RINGD_CUDA_BUILD_DIR=os.path.join(build, "build-cuda"),
                   # test.sh's fuzzers would configure the repository's build-fuzz with the
                   # stubbed cmake (which writes a fake cache there): not part of this test.
                   RINGD_SKIP_FUZZ="1", RINGD_FUZZ_BUILD_DIR=os.path.join(build, "build-fuzz"))
        # Hermetic: the caller's own test.sh settings (e.g. RINGD_SKIP_CUDA_BUILD=1 from a
        # developer's shell) must not change what test.sh does here.
        for name in ("CUDA_VISIBLE_DEVICES", "RINGD_SKIP_CUDA_BUILD"):
            env.pop(name, None)
        env.update(extra)
        start = time.monotonic()
        result = subprocess.run([os.path.join(self.repo, "scripts", script), *args], cwd=self.repo,
                                env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                timeout=240)
        result.seconds = time.monotonic() - start
        with open(self.log) as log:
            result.calls = [shlex.split(line) for line in log if line.strip()]
        result.report_text = open(self.report).read() if os.path.exists(self.report) else None
        return result


def report_lines(result, status):
    """The step names the report marks with status (PASS, FAIL, SKIP)."""
    return [line.split(None, 1)[1].split(":")[0] for line in (result.report_text or "").splitlines()
            if line.startswith("  " + status + " ")]


def main():
    repo = os.path.abspath(sys.argv[1])
    device_tests = sorted(os.path.basename(p)[:-3]
                          for p in glob.glob(os.path.join(repo, "tests/device/*_test.cc")))
    failures = []

    def check(condition, message, result=None):
        if not condition:
            detail = f"\n--- stderr:\n{result.stderr}\n--- report:\n{result.report_text}" if result else ""
            failures.append(message + detail)

    with tempfile.TemporaryDirectory(prefix="ringd-gpu-check-") as tmp:
        h = Harness(repo, tmp)

        # 1. No GPU: skip at once.
        r = h.run(FAKE_SMI_FAIL="1")
        check(r.returncode == 77, f"no GPU: exit {r.returncode}, want 77", r)
        check("no NVIDIA GPU visible: nvidia-smi failed: NVIDIA-SMI has failed" in r.stderr,
              "no GPU: the message does not say so plainly", r)
        check(r.seconds < 10, f"no GPU: took {r.seconds:.1f} s")
        check(not any(c[0] == "cmake" for c in r.calls), "no GPU: cmake was called", r)
        check(r.report_text is None, "no GPU: a report was written", r)
        if shutil.which("nvidia-smi") is None:
            r = h.run(path=os.environ["PATH"])
            check(r.returncode == 77 and "no NVIDIA GPU visible: nvidia-smi not found" in r.stderr,
                  f"no nvidia-smi: exit {r.returncode}", r)

        # 2. Two GPUs, everything passes; the CUDA directory configured as test.sh does.
        r = h.run()
        built_run = h.runs
        check(r.returncode == 0, f"2 GPUs: exit {r.returncode}, want 0", r)
        cuda_dir = os.path.join(tmp, f"run{h.runs}", "build-cuda")
        configure = [c[1:] for c in r.calls if c[0] == "cmake" and "-B" in c]
        builds = [c[1:] for c in r.calls if c[0] == "cmake" and "--build" in c]
        check(len(configure) == 1 and {"-DRINGD_WITH_CUDA=ON", f"-DCMAKE_CUDA_COMPILER={h.nvcc}",
                                       "-DRINGD_BUILD_BENCH=OFF"} <= set(configure[0]),
              f"2 GPUs: configure lines {configure}", r)
        check(len(builds) == 1 and builds[0][builds[0].index("--target") + 1:] ==
              ["ringd", *device_tests], f"2 GPUs: build lines {builds}", r)
        test_sh = h.run(script="test.sh")
        test_configure = [c[1:] for c in test_sh.calls if c[0] == "cmake" and "-B" in c
                          and c[c.index("-B") + 1].endswith("build-cuda")]
        norm = lambda lines: [sorted(re.sub(r"/run\d+/", "/RUN/", w) for w in line) for line in lines]
        check(norm(test_configure) == norm(configure),
              f"gpu_check.sh configures build-cuda as {configure}, test.sh as {test_configure}",
              test_sh)
        check(any(c[0] == "ctest" and "-R" in c and cuda_dir in c for c in r.calls),
              "2 GPUs: ctest -R on the CUDA directory was not run", r)
        benches = [c for c in r.calls if c[:3] == ["ringd", "bench", "allreduce"]]
        nccl = [c for c in benches if c[-1] == "CUDA_VISIBLE_DEVICES="]
        cpu = [c for c in benches if c[-1] == "CUDA_VISIBLE_DEVICES=-1"]
        check(len(nccl) >= 4 and len(cpu) == 4 and all(
            c[c.index("--local-devices") + 1] == "2" and "--check" in c and
            c[c.index("--transport") + 1] == "inproc" for c in benches),
              f"2 GPUs: bench runs {benches}", r)
        check({c[c.index("--ranks") + 1] for c in cpu} == {"1", "2"}, "2 GPUs: not 1 and 2 nodes", r)
        trains = [c for c in r.calls if c[:2] == ["ringd", "train"]]
        check({c[c.index("--blas") + 1] for c in trains} == {"cublas", "openblas"},
              f"2 GPUs: train runs {trains}", r)
        on_devices = [c for c in trains if "--local-devices" in c]
        check(len(on_devices) == 2 and sum("--gpus" in c for c in on_devices) == 1 and all(
            c[c.index("--local-devices") + 1] == "2" and c[c.index("--ranks") + 1] == "2"
            for c in on_devices), f"2 GPUs: train over devices {on_devices}", r)
        replays = [c for c in r.calls if c[:3] == ["ringd", "bench", "replay"]]
        check(sorted(c[c.index("--hierarchy") + 1] for c in replays) == ["reduce-bcast", "rs-ag"]
              and all("--gpus" in c and "--check" in c and
                      c[c.index("--local-devices") + 1] == "2" for c in replays),
              f"2 GPUs: replay runs {replays}", r)
        text = r.report_text or ""
        for needle in ("NVIDIA H100 80GB HBM3", "CUDA Version: 13.0", "nvcc: 13.0",
                       "header 2.99.1", "nccl busbw", "RESULT: PASS"):
            check(needle in text, f"2 GPUs: the report lacks '{needle}'", r)
        check(not report_lines(r, "FAIL") and not report_lines(r, "SKIP") and
              {"cublas against openblas", "train --gpus against CPU devices"} <=
              set(report_lines(r, "PASS")), f"2 GPUs: PASS lines {report_lines(r, 'PASS')}", r)

        # 3. Failing steps make the exit status and the report say so.
        r = h.run(FAKE_CTEST_RC="8", FAKE_BENCH_WRONG="nccl:2:rs-ag", FAKE_TRAIN_DRIFT="0.1",
                  FAKE_REPLAY_WRONG="rs-ag", FAKE_GPUS_DRIFT="0.01")
        check(r.returncode == 1, f"failures: exit {r.returncode}, want 1", r)
        check(sorted(report_lines(r, "FAIL")) == ["allreduce nccl-2node-rs-ag",
                                                  "cublas against openblas", "device tests",
                                                  "engine over the NCCL group (rs-ag)",
                                                  "train --gpus against CPU devices"],
              f"failures: FAIL lines {report_lines(r, 'FAIL')}", r)
        check("allreduce nccl-1node-rs-ag" in report_lines(r, "PASS") and
              "RESULT: FAIL" in (r.report_text or ""), "failures: the other steps", r)

        # 4. One GPU: one device per node, hierarchical all the same; train --gpus against 2 flat
        # ranks (CPU devices take no --hierarchy with one device).
        r = h.run(gpus=1)
        benches = [c for c in r.calls if c[:3] == ["ringd", "bench", "allreduce"]]
        check(r.returncode == 0 and benches and all(
            c[c.index("--local-devices") + 1] == "1" and "--hierarchy" in c for c in benches) and
              "one GPU only" in (r.report_text or "") and
              "train --gpus against CPU devices" in report_lines(r, "PASS"),
              "1 GPU: runs or report", r)

        # 5. --build-only without a GPU.
        r = h.run("--build-only", FAKE_SMI_FAIL="1")
        benches = [c for c in r.calls if c[:3] == ["ringd", "bench", "allreduce"]]
        check(r.returncode == 0 and any(c[0] == "cmake" for c in r.calls) and len(benches) == 4 and
              all(c[-1] == "CUDA_VISIBLE_DEVICES=-1" for c in benches) and
              sorted(report_lines(r, "SKIP")) == ["allreduce on the NCCL local group",
                                                  "engine over the NCCL group",
                                                  "train --blas cublas", "train --gpus"],
              f"--build-only: exit {r.returncode}, benches {benches}", r)

        # 6. --skip-build with no nvcc anywhere and case 2's build: nothing installed or built.
        install_log = os.path.join(cuda_dir, "gpu_check", "install_deps.log")
        os.remove(install_log)
        r = h.run("--skip-build", reuse=built_run, CUDACXX="/nonexistent/nvcc",
                  FAKE_CTEST_NEW_SUMMARY="1", RINGD_GPU_CHECK_DATA="/packed/data",
                  RINGD_GPU_CHECK_COMMIT="abc123-modified")
        benches = [c for c in r.calls if c[:3] == ["ringd", "bench", "allreduce"]]
        trains = [c for c in r.calls if c[:2] == ["ringd", "train"]]
        check(len(trains) == 4 and all(c[c.index("--data") + 1] == "/packed/data"
                                       for c in trains if "--data" in c) and
              all("--data" in c for c in trains), f"RINGD_GPU_CHECK_DATA: train runs {trains}", r)
        check(r.returncode == 0 and not any(c[0] == "cmake" for c in r.calls) and
              not os.path.exists(install_log) and len(benches) >= 8 and
              report_lines(r, "SKIP") == ["install dependencies"] and
              "cublas against openblas" in report_lines(r, "PASS") and
              "device tests: 4/4 passed" in (r.report_text or "") and
              "nvcc:" not in (r.report_text or "") and
              "(scripts/gpu_check.sh --skip-build) at abc123-modified," in (r.report_text or ""),
              f"--skip-build: exit {r.returncode}, benches {len(benches)}", r)
        r = h.run("--skip-build")
        check(r.returncode == 1 and "--skip-build but no" in (r.report_text or "") and
              not any(c[:3] == ["ringd", "bench", "allreduce"] for c in r.calls),
              f"--skip-build without a build: exit {r.returncode}", r)

    for failure in failures:
        print("FAIL: " + failure)
    if failures:
        return 1
    print("6 cases passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
