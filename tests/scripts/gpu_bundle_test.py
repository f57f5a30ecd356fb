#!/usr/bin/env python3
"""scripts/gpu_bundle.sh, without a GPU and without a CUDA build.

  1. pack from a fake CUDA build (ringd and the device tests are copies of system programs, so
     they load real shared libraries) and a fake dataset: the bundle holds the stripped binaries,
     a ctest file naming every tests/device/*_test, config.h, CMakeCache.txt, the dataset, the
     commit, and the programs' shared libraries except the C/C++ runtime's (libc, libstdc++).
  2. pack refuses, with exit 2 and a message naming what is missing: no ringd, a build that is
     not a CUDA build, no dataset.
  3. run on a machine whose nvidia-smi fails: unpacks into a fresh directory under TMPDIR, the
     ctest file names the unpacked tests, gpu_check.sh runs (and says no GPU: exit 77) with the
     bundle's libraries on LD_LIBRARY_PATH; run without a bundle: exit 2.

  gpu_bundle_test.py REPO_ROOT
"""
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def main():
    repo = os.path.abspath(sys.argv[1])
    script = os.path.join(repo, "scripts", "gpu_bundle.sh")
    device_tests = sorted(os.path.basename(p)[:-3]
                          for p in glob.glob(os.path.join(repo, "tests/device/*_test.cc")))
    program = shutil.which("ls")
    failures = []

    def check(condition, message, result=None):
        if not condition:
            detail = (f"\n--- exit {result.returncode}\n--- stderr:\n{result.stderr}"
                      if result is not None else "")
            failures.append(message + detail)

    with tempfile.TemporaryDirectory(prefix="ringd-gpu-bundle-") as tmp:
        build = os.path.join(tmp, "build-cuda")
        os.makedirs(os.path.join(build, "bin"))
        os.makedirs(os.path.join(build, "tests"))
        shutil.copy(program, os.path.join(build, "bin", "ringd"))
        for name in device_tests:
            shutil.copy(program, os.path.join(build, "tests", name))
        write(os.path.join(build, "generated", "ringd", "config.h"),
              "#define RINGD_HAVE_CUDA 1\n#define RINGD_HAVE_NCCL 1\n")
        write(os.path.join(build, "CMakeCache.txt"), "RINGD_WITH_CUDA:BOOL=ON\n")
        data = os.path.join(tmp, "data")
        for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                     "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
            write(os.path.join(data, name + ".gz"), name)
        bundle = os.path.join(tmp, "bundle.tar.xz")
        env = dict(os.environ, RINGD_CUDA_BUILD_DIR=build, RINGD_GPU_BUNDLE_DATA=data,
                   TMPDIR=tmp)

        def bundle_script(*args, **extra):
            return subprocess.run([script, *args], cwd=repo, env=dict(env, **extra),
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=240)

        # 1. pack
        r = bundle_script("pack", bundle)
        check(r.returncode == 0 and os.path.exists(bundle), "pack failed", r)
        if r.returncode == 0:
            with tarfile.open(bundle) as tar:
                names = set(tar.getnames())
                ctest = tar.extractfile("build-cuda/CTestTestfile.cmake.in").read().decode()
                commit = tar.extractfile("commit").read().decode().strip()
            wanted = {"build-cuda/bin/ringd", "build-cuda/generated/ringd/config.h",
                      "build-cuda/CMakeCache.txt", "data/train-images-idx3-ubyte.gz", "commit",
                      *(f"build-cuda/tests/{name}" for name in device_tests)}
            check(wanted <= names, f"pack: missing {sorted(wanted - names)}")
            libraries = {n[4:] for n in names if n.startswith("lib/") and len(n) > 4}
            linked = subprocess.run(["ldd", program], capture_output=True, text=True).stdout
            expected = {line.split()[0] for line in linked.splitlines()
                        if "=> /" in line and not line.split()[0].startswith(("libc.", "libm."))}
            check(expected and expected <= libraries,
                  f"pack: libraries {sorted(libraries)}, {program} loads {sorted(expected)}")
            check(not any(n.startswith(("libc.", "libstdc++", "ld-linux")) for n in libraries),
                  f"pack: the C/C++ runtime was packed: {sorted(libraries)}")
            check(all(f'"@BUILD@/tests/{name}"' in ctest for name in device_tests),
                  f"pack: the ctest file is\n{ctest}")
            head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=repo,
                                  capture_output=True, text=True).stdout.strip()
            check(commit.startswith(head or "unknown"), f"pack: commit '{commit}', HEAD '{head}'")

        # 2. refusals
        r = bundle_script("pack", os.path.join(tmp, "x.tar.xz"),
                          RINGD_CUDA_BUILD_DIR=os.path.join(tmp, "nothing"))
        check(r.returncode == 2 and "gpu_check.sh --build-only" in r.stderr,
              "pack without a build", r)
        cpu_build = os.path.join(tmp, "cpu-build")
        shutil.copytree(build, cpu_build)
        write(os.path.join(cpu_build, "generated", "ringd", "config.h"),
              "#define RINGD_HAVE_CUDA 0\n")
        r = bundle_script("pack", os.path.join(tmp, "x.tar.xz"), RINGD_CUDA_BUILD_DIR=cpu_build)
        check(r.returncode == 2 and "is not a CUDA build" in r.stderr, "pack of a CPU build", r)
        r = bundle_script("pack", os.path.join(tmp, "x.tar.xz"),
                          RINGD_GPU_BUNDLE_DATA=os.path.join(tmp, "nothing"))
        check(r.returncode == 2 and "no Fashion-MNIST" in r.stderr, "pack without data", r)
        check(not os.path.exists(os.path.join(tmp, "x.tar.xz")), "a refused pack wrote a bundle")

        # 3. run, on a machine whose nvidia-smi fails (it records what it was given)
        stubs = os.path.join(tmp, "stubs")
        seen = os.path.join(tmp, "nvidia-smi.env")
        write(os.path.join(stubs, "nvidia-smi"),
              f'#!/bin/sh\necho "$LD_LIBRARY_PATH" > "{seen}"\n'
              'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the driver"\n'
              "exit 9\n", 0o755)
        if os.path.exists(bundle):
            r = bundle_script("run", bundle, PATH=stubs + os.pathsep + os.environ["PATH"])
            unpacked = glob.glob(os.path.join(tmp, "ringd-gpu-bundle.*"))
            check(r.returncode == 77 and "no NVIDIA GPU visible" in r.stderr and
                  len(unpacked) == 1, f"run: unpacked {unpacked}", r)
            if len(unpacked) == 1:
                with open(os.path.join(unpacked[0], "build-cuda", "CTestTestfile.cmake")) as f:
                    ctest = f.read()
                check(all(f'"{unpacked[0]}/build-cuda/tests/{name}"' in ctest
                          for name in device_tests), f"run: the ctest file is\n{ctest}")
                library_path = open(seen).read().strip() if os.path.exists(seen) else ""
                check(os.path.join(unpacked[0], "lib") in library_path.split(":"),
                      f"run: gpu_check ran with LD_LIBRARY_PATH={library_path!r}", r)
        r = bundle_script("run", os.path.join(tmp, "absent.tar.xz"))
        check(r.returncode == 2 and "no bundle" in r.stderr, "run without a bundle", r)

    for failure in failures:
        print("FAIL: " + failure)
    if failures:
        return 1
    print("3 cases passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
