#!/usr/bin/env python3
"""The layers of src/ as docs/architecture.md draws them, checked in every file and in the build.

docs/architecture.md's "Layers" table names each layer (a folder of src/), the layers it stands on
directly, the public headers (include/ringd/) it implements and whether it is in libringd. From it:

  - every folder of src/ is a layer, every layer a folder, every public header has one owner;
  - every `#include "X/..."` in src/<layer>/ (any depth) names its own layer, a layer it stands on
    (directly or through others), a public header of one of those, or the generated proto/
    messages (which the lowest layer that links them, fusion, owns);
  - every public header includes only public headers of its own layer or of those below;
  - the Python extension (python/src/) includes only public headers of libringd's layers (and the
    C table of its TensorFlow ops, ringd_tf_bridge.h), and no layer in libringd stands on one
    outside it;
  - src/<layer>/CMakeLists.txt links exactly the layers the table says (ringd_add_layer(... DEPENDS
    ...)), and CMakeLists.txt's RINGD_CORE_LAYERS are the table's libringd layers.

The build enforces the same order (cmake/Layers.cmake: a layer's headers are visible only to the
layers above it); this test also reads the files the build does not compile here (CUDA, ibverbs)
and says which line and which rule. Before checking the tree it checks itself: a copy of the tree
with one back-pointing include (src/net/socket.cc including a fusion header) must fail.

Usage: layers_test.py SOURCE_DIR
"""
import os
import re
import shutil
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_SUFFIXES = (".cc", ".h", ".cu", ".cuh")


def read_table(root):
    """{layer: (set of direct dependencies, set of public headers, in_libringd)} and problems."""
    path = os.path.join(root, "docs", "architecture.md")
    layers, problems = {}, []
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    try:
        start = next(i for i, line in enumerate(lines)
                     if re.match(r"^\|\s*layer\s*\|\s*stands on\s*\|", line))
    except StopIteration:
        return {}, [f"{path}: no layers table (a row starting '| layer | stands on |')"]
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 4:
            problems.append(f"{path}: a layers row with {len(cells)} cells: {line}")
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        if len(names) != 1:
            problems.append(f"{path}: a layers row without one `layer`: {line}")
            continue
        depends = set(re.findall(r"`([^`]+)`", cells[1]))
        headers = {h.split("/", 1)[1] for h in re.findall(r"`(ringd/[^`]+)`", cells[2])}
        in_library = cells[3].lower().startswith("yes")
        layers[names[0]] = (depends, headers, in_library)
    return layers, problems


def closure(layers, name):
    """The layers `name` stands on, directly or through others."""
    seen, todo = set(), list(layers.get(name, ((), (), False))[0])
    while todo:
        layer = todo.pop()
        if layer not in seen:
            seen.add(layer)
            todo.extend(layers.get(layer, ((), (), False))[0])
    return seen


def source_files(directory):
    for folder, _, files in os.walk(directory):
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.join(folder, name)


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            match = INCLUDE.match(line)
            if match:
                yield number, match.group(1)


def check(root):
    """Every way the tree breaks the documented layers, as 'file:line: what' texts."""
    layers, problems = read_table(root)
    if not layers:
        return problems
    src = os.path.join(root, "src")
    folders = {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))}
    for folder in sorted(folders - set(layers)):
        problems.append(f"src/{folder}/ is no layer of docs/architecture.md's table")
    for layer in sorted(set(layers) - folders):
        problems.append(f"layer {layer} of docs/architecture.md has no folder src/{layer}/")
    for layer, (depends, _, _) in sorted(layers.items()):
        for dependency in sorted(depends - set(layers)):
            problems.append(f"layer {layer} stands on {dependency}, which is no layer")
        if layer in closure(layers, layer):
            problems.append(f"layer {layer} stands on itself (a cycle)")

    owner = {}
    for layer, (_, headers, _) in layers.items():
        for header in headers:
            if header in owner:
                problems.append(f"ringd/{header} is listed under {owner[header]} and {layer}")
            owner[header] = layer
    public = {name for name in os.listdir(os.path.join(root, "include", "ringd"))
              if name.endswith(".h")} | {"config.h"}  # config.h: generated from cmake/config.h.in
    for header in sorted(public - set(owner)):
        problems.append(f"include/ringd/{header} has no layer in docs/architecture.md's table")
    for header in sorted(set(owner) - public):
        problems.append(f"docs/architecture.md lists ringd/{header}, which does not exist")

    def target_layer(including_file, text):
        """The layer an include names, '' when it is the including file's neighbour, None if
        unknown."""
        first = text.split("/", 1)[0]
        if first == "ringd":
            return owner.get(text.split("/", 1)[1])
        if first == "proto":
            return "fusion"
        if first in layers:
            return first
        if os.path.exists(os.path.join(os.path.dirname(including_file), text)):
            return ""
        return None

    def rule(layer):
        below = closure(layers, layer)
        return f"{layer} stands on {', '.join(sorted(below)) or 'nothing'}"

    for layer in sorted(layers.keys() & folders):
        allowed = closure(layers, layer) | {layer, ""}
        for path in source_files(os.path.join(src, layer)):
            shown = os.path.relpath(path, root)
            for number, text in includes(path):
                target = target_layer(path, text)
                if target is None:
                    problems.append(f"{shown}:{number}: #include \"{text}\" names no layer, no "
                                    "public header and no file beside it")
                elif target not in allowed:
                    problems.append(f"{shown}:{number}: #include \"{text}\" reaches up into "
                                    f"{target}; {rule(layer)} (docs/architecture.md, Layers)")

    for header in sorted(public & set(owner)):
        path = os.path.join(root, "include", "ringd", header)
        if not os.path.exists(path):
            continue
        layer = owner[header]
        allowed = closure(layers, layer) | {layer}
        for number, text in includes(path):
            target = owner.get(text.split("/", 1)[1]) if text.startswith("ringd/") else None
            if target not in allowed:
                problems.append(f"include/ringd/{header}:{number}: #include \"{text}\": a public "
                                f"header of {layer} may include only public headers of "
                                f"{layer} and below ({rule(layer)})")

    library = {layer for layer, (_, _, in_library) in layers.items() if in_library}
    for layer in sorted(library):
        for dependency in sorted(closure(layers, layer) - library):
            problems.append(f"layer {layer} is in libringd but stands on {dependency}, which is not")
    python_src = os.path.join(root, "python", "src")
    if os.path.isdir(python_src):
        for path in source_files(python_src):
            for number, text in includes(path):
                target = target_layer(path, text)
                if target == "" or text == "ringd_tf_bridge.h":  # its own; the C table of its ops
                    continue
                if not text.startswith("ringd/") or target not in library:
                    problems.append(f"{os.path.relpath(path, root)}:{number}: #include \"{text}\": "
                                    "the Python extension links libringd and includes only its "
                                    "public headers")

    for layer in sorted(layers.keys() & folders):
        cmake = os.path.join(src, layer, "CMakeLists.txt")
        if not os.path.exists(cmake):
            problems.append(f"src/{layer}/ has no CMakeLists.txt")
            continue
        with open(cmake, encoding="utf-8") as f:
            match = re.search(r"ringd_add_layer\(\s*(\w+)([^)]*)\)", f.read())
        if not match or match.group(1) != layer:
            problems.append(f"src/{layer}/CMakeLists.txt does not call ringd_add_layer({layer} ...)")
            continue
        depends_match = re.search(r"\bDEPENDS\b([^)]*)", match.group(2))
        linked = set(depends_match.group(1).split()) if depends_match else set()
        if linked != layers[layer][0]:
            problems.append(f"src/{layer}/CMakeLists.txt links {sorted(linked)}; "
                            f"docs/architecture.md says {layer} stands on {sorted(layers[layer][0])}")
    with open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8") as f:
        core = re.search(r"set\(RINGD_CORE_LAYERS([^)]*)\)", f.read())
    core_layers = set(core.group(1).split()) if core else set()
    if core_layers != library:
        problems.append(f"CMakeLists.txt's RINGD_CORE_LAYERS are {sorted(core_layers)}; "
                        f"docs/architecture.md's libringd layers are {sorted(library)}")
    return problems


def self_test(root):
    """A copy of the tree with a back-pointing include must fail, naming the file and the rule."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = os.path.join(scratch, "tree")
        for part in ("src", "include", "docs", "python/src"):
            if os.path.isdir(os.path.join(root, part)):
                shutil.copytree(os.path.join(root, part), os.path.join(copy, part))
        shutil.copy(os.path.join(root, "CMakeLists.txt"), copy)
        victim = os.path.join(copy, "src", "net", "socket.cc")
        with open(victim, encoding="utf-8") as f:
            text = f.read()
        with open(victim, "w", encoding="utf-8") as f:
            f.write('#include "fusion/engine_impl.h"\n' + text)
        found = check(copy)
        wanted = 'src/net/socket.cc:1: #include "fusion/engine_impl.h" reaches up into fusion'
        if not any(problem.startswith(wanted) for problem in found):
            print("self-test: the checker missed a back-pointing include; it said:")
            for problem in found:
                print("  " + problem)
            return False
        print("self-test: a back-pointing include is caught:")
        for problem in found:
            print("  " + problem)
        return True


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    if not self_test(root):
        return 1
    problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} layer violation(s)")
        return 1
    layers, _ = read_table(root)
    print(f"{len(layers)} layers, every include in src/, include/ringd/ and python/src/ "
          "points down, and the build links as documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
