#!/usr/bin/env python3
"""The Dockerfile builds ringd the way the README and CI do, and ships what the manifests expect.

The default suite builds no image (scripts/e2e_k8s.sh does, opt-in); this checks, from the
Dockerfile's text:
  - the build stage installs dependencies only through scripts/install_deps.sh, called as
    scripts/test.sh calls it, and builds only through scripts/build.sh, with -D options the project
    defines and, where scripts/test.sh's CUDA build sets the same option, the same value;
  - the two variants (ARG VARIANT=cuda|cpu): the build and runtime stages start from the variant's
    base, the cuda ones from one pinned CUDA version (devel, then runtime, Ubuntu 22.04), the cpu
    ones from ARG CPU_BASE (default the same Ubuntu); the cuda variant builds with
    -DRINGD_WITH_CUDA=ON, the cpu one OFF;
  - the runtime stage takes the binary from where CMake puts it (checked against a real build when
    given), installs the list scripts/runtime_packages.sh made from it, runs as the non-root uid
    that k8s/base/statefulset.yaml runs as, and starts `ringd agent`;
  - .dockerignore keeps the build trees and .git out and every source the build needs in.

  dockerfile_test.py REPO_ROOT [RINGD_BINARY BUILD_DIR]
"""
import fnmatch
import os
import re
import shlex
import subprocess
import sys
import tempfile


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def instructions(path):
    """[(line number, INSTRUCTION, arguments)] with continuations joined and comments dropped."""
    result, pending, start = [], "", 0
    for number, line in enumerate(open(path), 1):
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued RUN
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        text = pending + stripped
        pending = ""
        word, _, rest = text.partition(" ")
        result.append((start, word.upper(), rest.strip()))
    return result


def stages(steps):
    """Splits instructions at FROM: [(from arguments, [steps])], plus the ARGs before the first."""
    preamble, found = [], []
    for step in steps:
        if step[1] == "FROM":
            found.append((step[2], []))
        elif found:
            found[-1][1].append(step)
        else:
            preamble.append(step)
    return preamble, found


def cache_variables(repo):
    """Options the project defines: option(NAME ...) and set(NAME ... CACHE ...)."""
    names = set()
    paths = [os.path.join(repo, "CMakeLists.txt")]
    cmake_dir = os.path.join(repo, "cmake")
    paths += [os.path.join(cmake_dir, f) for f in os.listdir(cmake_dir) if f.endswith(".cmake")]
    for path in paths:
        text = open(path).read()
        names.update(re.findall(r"option\(\s*(\w+)", text))
        names.update(re.findall(r"set\(\s*(\w+)\s+[^)]*\bCACHE\b", text))
    return names


def shell_commands(run):
    """A RUN line split into its commands at && (the only separator these RUN lines use)."""
    return [shlex.split(part) for part in re.split(r"\s*&&\s*", run) if part.strip()]


def assignments_and_args(words):
    env = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return env, words


def defines(args):
    return dict(a[2:].split("=", 1) for a in args if a.startswith("-D") and "=" in a)


def test_cuda_defines(repo):
    """The -D options of scripts/test.sh's CUDA build (the build.sh call with RINGD_WITH_CUDA=ON)."""
    text = open(os.path.join(repo, "scripts", "test.sh")).read().replace("\\\n", " ")
    for line in text.splitlines():
        if "scripts/build.sh" in line and "-DRINGD_WITH_CUDA=ON" in line:
            return dict(re.findall(r"-D(\w+)=([^\s;]+)", line))
    raise Failure("scripts/test.sh has no CUDA build (scripts/build.sh ... -DRINGD_WITH_CUDA=ON)")


def dockerignore_excludes(patterns, path):
    """Docker's .dockerignore matching for the patterns used here (no `!` exceptions)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        for prefix in prefixes:
            if fnmatch.fnmatchcase(prefix, pattern):
                return pattern
            if pattern.startswith("**/") and fnmatch.fnmatchcase(prefix.split("/")[-1], pattern[3:]):
                return pattern
    return None


def check_all(repo, dockerfile, dockerignore, binary=None, build_dir=None):
    preamble, found = stages(instructions(dockerfile))

    # ---- the variants' bases: one pinned CUDA version (devel, then runtime), or CPU_BASE ----
    args = dict(a[2].split("=", 1) for a in preamble if a[1] == "ARG" and "=" in a[2])
    cuda = args.get("CUDA_VERSION", "")
    check(re.fullmatch(r"\d+\.\d+\.\d+", cuda),
          f"Dockerfile: ARG CUDA_VERSION={cuda!r} before the first FROM must pin X.Y.Z")
    check(args.get("VARIANT") == "cuda",
          f"Dockerfile: ARG VARIANT={args.get('VARIANT')!r} before the first FROM: the default "
          "must be cuda (the image scripts/test.sh's CUDA build corresponds to)")
    check(args.get("CPU_BASE") == "ubuntu:22.04",
          f"Dockerfile: ARG CPU_BASE={args.get('CPU_BASE')!r} before the first FROM: the published "
          "cpu image's default base must be ubuntu:22.04 (the e2e suite passes debian:bookworm)")
    by_name = {}
    for source, steps in found:
        image, _, name = source.partition(" AS ")
        by_name[name.strip()] = (image.strip(), steps)
    expected_bases = {
        "build-cuda": "nvidia/cuda:${CUDA_VERSION}-devel-ubuntu22.04",
        "runtime-cuda": "nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu22.04",
        "build-cpu": "${CPU_BASE}",
        "runtime-cpu": "${CPU_BASE}",
        "build": "build-${VARIANT}",
        "runtime": "runtime-${VARIANT}",
    }
    check(sorted(by_name) == sorted(expected_bases),
          f"Dockerfile: stages {sorted(by_name)}, expected {sorted(expected_bases)}")
    for name, image in expected_bases.items():
        check(by_name[name][0] == image,
              f"Dockerfile: {name.split('-')[0]} stage {name} is FROM {by_name[name][0]}, expected "
              f"{image}")
    build_steps = by_name["build"][1]
    runtime_steps = by_name["runtime"][1]
    variant_cuda = {}
    for variant in ("cuda", "cpu"):
        envs = dict(a[2].split("=", 1) for a in by_name[f"build-{variant}"][1]
                    if a[1] == "ENV" and "=" in a[2])
        variant_cuda[variant] = envs.get("IMAGE_WITH_CUDA")
    check(variant_cuda == {"cuda": "ON", "cpu": "OFF"},
          f"Dockerfile: IMAGE_WITH_CUDA per variant is {variant_cuda}, expected cuda ON, cpu OFF")

    # ---- build stage: only the README's scripts ----
    runs = [(n, shell_commands(a)) for n, i, a in build_steps if i == "RUN"]
    install = [(n, c) for n, cmds in runs for c in cmds if "scripts/install_deps.sh" in c]
    check(len(install) == 1, "Dockerfile: the build stage must run scripts/install_deps.sh once")
    line, command = install[0]
    check(command == ["scripts/install_deps.sh"],
          f"Dockerfile:{line}: {command}: call scripts/install_deps.sh without arguments, as "
          "scripts/test.sh does")
    copies = [n for n, i, a in build_steps if i == "COPY" and n < line]
    check(copies, f"Dockerfile:{line}: install_deps.sh runs before anything is copied in")
    for n, cmds in runs:
        for c in cmds:
            check(not (c[:1] == ["apt-get"] and "install" in c),
                  f"Dockerfile:{n}: apt-get install in the build stage: add the package to "
                  "scripts/install_deps.sh instead (one list for the README, CI and the image)")
    builds = [(n, c) for n, cmds in runs for c in cmds if "scripts/build.sh" in c]
    check(len(builds) == 1, "Dockerfile: the build stage must run scripts/build.sh once")
    line, command = builds[0]
    env, words = assignments_and_args(list(command))
    check(words[0] == "scripts/build.sh", f"Dockerfile:{line}: {words[0]} is not scripts/build.sh")
    build_env = env.get("RINGD_BUILD_DIR", "build")
    check("ringd" in env.get("RINGD_BUILD_TARGETS", "ringd").split(),
          f"Dockerfile:{line}: RINGD_BUILD_TARGETS does not include ringd")
    # The cuda variant's options (the image scripts/test.sh's CUDA build corresponds to).
    options = {name: value.replace("${IMAGE_WITH_CUDA}", variant_cuda["cuda"])
               for name, value in defines(words[1:]).items()}
    known = cache_variables(repo)
    for name, value in options.items():
        check(name in known or name.startswith("CMAKE_"),
              f"Dockerfile:{line}: -D{name} is not an option of this project (CMakeLists.txt, "
              f"cmake/*.cmake define: {', '.join(sorted(known))})")
        if name.startswith("RINGD_WITH_"):
            check(value in ("ON", "OFF", "AUTO"), f"Dockerfile:{line}: -D{name}={value}")
    ci = test_cuda_defines(repo)
    for name, value in ci.items():
        if name in options:
            check(options[name].strip('"') == value,
                  f"Dockerfile:{line}: -D{name}={options[name]} but scripts/test.sh's CUDA build, "
                  f"which CI compiles, uses {value}")
    check(options.get("RINGD_WITH_CUDA") == "ON",
          f"Dockerfile:{line}: the image must be the CUDA build (-DRINGD_WITH_CUDA=ON), the one "
          "scripts/test.sh compiles")

    # ---- where the binary is: CMake's place for it, checked against a real build ----
    built = f"{build_env}/bin/ringd"
    if binary and build_dir:
        relative = os.path.relpath(os.path.realpath(binary), os.path.realpath(build_dir))
        check(relative == "bin/ringd",
              f"this build puts ringd at {relative}, the Dockerfile copies bin/ringd")
    listing = [c for n, cmds in runs for c in cmds if "scripts/runtime_packages.sh" in c]
    check(listing and listing[0][1] == built,
          f"Dockerfile: the build stage must run scripts/runtime_packages.sh {built}")

    # ---- runtime stage ----
    copied = [a for n, i, a in runtime_steps if i == "COPY"]
    check(any(a.startswith("--from=build ") and a.split()[1] == f"/src/{built}" for a in copied),
          f"Dockerfile: the runtime stage does not COPY --from=build /src/{built}")
    runtime_runs = " ".join(a for n, i, a in runtime_steps if i == "RUN")
    check("xargs -a /tmp/runtime-packages.txt apt-get install" in runtime_runs,
          "Dockerfile: the runtime stage does not install runtime-packages.txt")
    check("openmpi-bin" in runtime_runs, "Dockerfile: the runtime stage lacks openmpi-bin (mpirun, "
                                         "orted)")
    users = [a for n, i, a in runtime_steps if i == "USER"]
    check(users, "Dockerfile: the runtime stage has no USER: it would run as root")
    uid = users[-1].split(":")[0]
    check(uid.isdigit() and uid != "0", f"Dockerfile: USER {users[-1]} must be a non-zero uid "
                                        "(runAsNonRoot can only verify a numeric one)")
    statefulset = open(os.path.join(repo, "k8s", "base", "statefulset.yaml")).read()
    uids = set(re.findall(r"runAsUser: (\d+)", statefulset))
    check(uids == {uid}, f"Dockerfile: USER {uid} but k8s/base/statefulset.yaml runs as another "
                         f"uid ({', '.join(sorted(uids))})")
    entry = [a for n, i, a in runtime_steps if i == "ENTRYPOINT"]
    check(entry and entry[-1] == '["ringd", "agent"]',
          f"Dockerfile: ENTRYPOINT {entry} is not the exec form [\"ringd\", \"agent\"]")

    # ---- install_deps.sh can run unattended in a container ----
    deps = open(os.path.join(repo, "scripts", "install_deps.sh")).read()
    check("DEBIAN_FRONTEND=noninteractive" in deps and "-y" in deps,
          "scripts/install_deps.sh does not run apt-get non-interactively (docker build has no "
          "terminal)")

    # ---- .dockerignore ----
    patterns = [line.strip() for line in open(dockerignore)
                if line.strip() and not line.startswith("#")]
    check(not any(p.startswith("!") for p in patterns),
          ".dockerignore: `!` exceptions are not understood by this test")
    for must in (".git", "build", "build-cuda", "build-tools"):
        check(dockerignore_excludes(patterns, must + "/x"),
              f".dockerignore: {must}/ is sent to the build")
    tracked = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True,
                             check=True).stdout.split()
    # What the two images' builds read: the C++ tree and its scripts, and for examples/pytorch's
    # wheel the Python package, pyproject.toml (whose readme is README.md) and the examples. The
    # opt-in e2e suite (scripts/e2e*) builds the images and is not part of them.
    needed = [p for p in tracked if p in ("CMakeLists.txt", "pyproject.toml", "README.md") or
              p.split("/")[0] in ("cmake", "src", "include", "proto", "scripts", "data",
                                  "python", "examples")]
    needed = [p for p in needed if not p.startswith(("scripts/e2e/", "scripts/e2e_k8s.sh"))]
    check(needed, "git ls-files lists no sources")
    for path in needed:
        pattern = dockerignore_excludes(patterns, path)
        check(pattern is None, f".dockerignore: {pattern!r} keeps {path} out of the build")

    return (f"CUDA {cuda}, install_deps.sh, build.sh {' '.join(words[1:])} into {build_env}, "
            f"runtime stage as uid {uid}; .dockerignore keeps {len(needed)} sources")


# Defects each check above exists for: (file, text, replacement, what the failure must say).
MUTANTS = [
    ("Dockerfile", "-DRINGD_WITH_IBVERBS=ON", "-DRINGD_WITH_IBVERB=ON", "not an option"),
    ("Dockerfile", "-DRINGD_BUILD_BENCH=OFF", "-DRINGD_BUILD_BENCH=ON", "CUDA build"),
    ("Dockerfile", "RUN scripts/install_deps.sh",
     "RUN apt-get update && apt-get install -y cmake && scripts/install_deps.sh", "apt-get install"),
    ("Dockerfile", "RUN scripts/install_deps.sh", "RUN scripts/install_deps.sh --all",
     "without arguments"),
    ("Dockerfile", "USER 10001:10001", "USER 1000:1000", "runs as another uid"),
    ("Dockerfile", "USER 10001:10001", "", "no USER"),
    ("Dockerfile", '["ringd", "agent"]', '["ringd"]', "ENTRYPOINT"),
    ("Dockerfile", "-runtime-ubuntu22.04", "-runtime-ubuntu24.04", "runtime stage runtime-cuda"),
    ("Dockerfile", "FROM ${CPU_BASE} AS runtime-cpu", "FROM ubuntu:24.04 AS runtime-cpu",
     "runtime stage runtime-cpu"),
    ("Dockerfile", "ARG CPU_BASE=ubuntu:22.04", "ARG CPU_BASE=ubuntu:24.04", "CPU_BASE"),
    ("Dockerfile", "ENV IMAGE_WITH_CUDA=OFF", "ENV IMAGE_WITH_CUDA=ON", "cpu OFF"),
    ("Dockerfile", "ARG VARIANT=cuda", "ARG VARIANT=cpu", "default must be cuda"),
    ("Dockerfile", "ARG CUDA_VERSION=13.0.0", "ARG CUDA_VERSION=latest", "must pin"),
    ("Dockerfile", "/src/build-image/bin/ringd", "/src/build-image/ringd", "COPY"),
    (".dockerignore", "build*/", "build*/\nsrc/", "keeps src/"),
    (".dockerignore", "build*/", "", "build/ is sent"),
    (".dockerignore", "scripts/e2e/", "python/", "keeps python/"),
]


def main():
    repo = os.path.abspath(sys.argv[1])
    binary = sys.argv[2] if len(sys.argv) > 2 else None
    build_dir = sys.argv[3] if len(sys.argv) > 3 else None
    files = {name: open(os.path.join(repo, name)).read() for name in ("Dockerfile", ".dockerignore")}
    summary = check_all(repo, os.path.join(repo, "Dockerfile"), os.path.join(repo, ".dockerignore"),
                        binary, build_dir)
    # Each check must be able to fail: every mutant of the real files must be caught, by the
    # check meant for it.
    with tempfile.TemporaryDirectory(prefix="ringd-dockerfile-") as tmp:
        for name, old, new, expected in MUTANTS:
            check(old in files[name], f"{name} no longer contains {old!r}: update MUTANTS")
            mutated = dict(files)
            mutated[name] = files[name].replace(old, new)
            for other, text in mutated.items():
                with open(os.path.join(tmp, other), "w") as f:
                    f.write(text)
            try:
                check_all(repo, os.path.join(tmp, "Dockerfile"), os.path.join(tmp, ".dockerignore"))
            except Failure as failure:
                check(expected in str(failure), f"mutant {old!r} -> {new!r} in {name} failed for "
                                                f"another reason: {failure}")
                continue
            raise Failure(f"mutant {old!r} -> {new!r} in {name} passed the checks")
    print(f"PASS: Dockerfile: {summary}; all {len(MUTANTS)} mutants caught")
    nvcc = subprocess.run("nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version",
                          shell=True, capture_output=True, text=True).stdout
    release = re.search(r"release (\d+\.\d+)", nvcc)
    cuda = re.search(r"ARG CUDA_VERSION=(\S+)", files["Dockerfile"]).group(1)
    if release and not cuda.startswith(release.group(1) + "."):
        print(f"note: this machine's nvcc (CI's CUDA build) is {release.group(1)}, the image's "
              f"CUDA is {cuda}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as failure:
        print(f"FAIL: {failure}")
        sys.exit(1)
