#!/usr/bin/env python3
"""scripts/runtime_packages.sh lists the packages a binary's libraries come from, or fails saying
which library it cannot place.

On the real ringd: exit 0, NAME=VERSION lines of installed packages, among them the owners of
libc, libstdc++ and every library ldd names that the Dockerfile's runtime stage would otherwise
miss (protobuf, Open MPI, verbs when linked). Then on a small program built here against a library
of its own: that library belongs to no package (exit 1, named), and, once deleted, is missing
(exit 1, named).

  runtime_packages_test.py REPO_ROOT RINGD_BINARY
"""
import os
import shutil
import subprocess
import sys
import tempfile


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def run(script, binary):
    result = subprocess.run([script, binary], capture_output=True, text=True, timeout=120)
    return result.returncode, result.stdout, result.stderr


def main():
    repo, ringd = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    script = os.path.join(repo, "scripts", "runtime_packages.sh")
    if shutil.which("dpkg-query") is None:
        print("SKIP: dpkg-query not found: runtime_packages.sh is for Debian/Ubuntu")
        return 77

    code, out, err = run(script, ringd)
    check(code == 0, f"runtime_packages.sh {ringd}: exit {code}: {err}")
    packages = dict(line.split("=", 1) for line in out.split())
    for name, version in packages.items():
        status = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True,
                                text=True).stdout
        check(status == version, f"{name}={version} but dpkg says {status!r}")
    check("libc6" in packages, f"libc6 not listed: {sorted(packages)}")
    check(any(p.startswith("libstdc++") for p in packages), f"libstdc++ not listed: {sorted(packages)}")
    ldd = subprocess.run(["ldd", ringd], capture_output=True, text=True).stdout
    for library, hint in (("libprotobuf", "protobuf"), ("libmpi.so", "openmpi"),
                          ("libibverbs", "libibverbs"), ("libopenblas", "openblas"),
                          ("libz.so", "zlib")):
        if library in ldd:
            check(any(hint in p for p in packages),
                  f"ringd links {library} but no *{hint}* package is listed: {sorted(packages)}")

    # A library no package owns, then the same library gone.
    if shutil.which("cc") is None:
        print("SKIP: no C compiler for the negative cases")
        return 77
    with tempfile.TemporaryDirectory(prefix="ringd-runtime-packages-") as tmp:
        with open(os.path.join(tmp, "k8sfake.c"), "w") as f:
            f.write("int k8sfake(void) { return 0; }\n")
        with open(os.path.join(tmp, "main.c"), "w") as f:
            f.write("int k8sfake(void);\nint main(void) { return k8sfake(); }\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-o", "libk8sfake.so", "k8sfake.c"], cwd=tmp,
                       check=True)
        subprocess.run(["cc", "-o", "prog", "main.c", "-L.", "-lk8sfake", f"-Wl,-rpath,{tmp}"],
                       cwd=tmp, check=True)
        program = os.path.join(tmp, "prog")
        code, out, err = run(script, program)
        check(code == 1 and "libk8sfake.so" in err and "belongs to no installed package" in err,
              f"a library of no package: exit {code}, stderr {err!r}")
        os.remove(os.path.join(tmp, "libk8sfake.so"))
        code, out, err = run(script, program)
        check(code == 1 and "libk8sfake.so => not found" in err,
              f"a missing library: exit {code}, stderr {err!r}")
        code, out, err = run(script, os.path.join(tmp, "main.c"))
        check(code == 1 and "main.c is not an executable file" in err,
              f"not an executable: exit {code}, stderr {err!r}")
    print(f"PASS: {len(packages)} packages for {ringd}: {' '.join(sorted(packages))}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as failure:
        print(f"FAIL: {failure}")
        sys.exit(1)
