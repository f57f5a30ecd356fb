"""Loading ringd._core: libringd and its protobuf bound to each other, everything else as usual.

TensorFlow loads its libraries RTLD_GLOBAL and exports a protobuf of its own (another version);
libringd's protobuf calls, resolved after TensorFlow is loaded, would bind partly to TensorFlow's
copy and crash in the engine's first negotiation. So _core is loaded with RTLD_DEEPBIND: its own
dependencies' symbols first.

RTLD_DEEPBIND also binds the libraries it loads to libc's own copy of variables that the
executable holds copies of (`environ`: python3 has a copy relocation for it). Open MPI's
opal_setenv compares the array it is given with `environ` and, when they differ, frees entries
it never allocated: under mpirun every process aborted in MPI_Init ("free(): invalid pointer";
found when the TensorFlow image first ran, scripts/e2e/build_images.sh). So every library libringd
needs except protobuf is loaded first, the usual way, and only _core, libringd and protobuf take
the deep binding.
"""

import ctypes
import os
import struct
import sys

_PT_DYNAMIC = 2
_DT_NEEDED, _DT_STRTAB, _DT_RPATH, _DT_RUNPATH = 1, 5, 15, 29


def _dynamic_entries(path):
    """(NEEDED sonames, RUNPATH/RPATH directories) of a 64-bit little-endian ELF file; ([], [])
    for anything else."""
    try:
        with open(path, "rb") as f:
            header = f.read(64)
            if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
                return [], []
            phoff, = struct.unpack_from("<Q", header, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            segments = [struct.unpack_from("<IIQQQQQQ", table, i * phentsize) for i in range(phnum)]
            dynamic = next((s for s in segments if s[0] == _PT_DYNAMIC), None)
            if dynamic is None:
                return [], []
            f.seek(dynamic[2])
            raw = f.read(dynamic[5])
            entries = [struct.unpack_from("<qQ", raw, i) for i in range(0, len(raw) - 15, 16)]
            strtab_address = next((v for t, v in entries if t == _DT_STRTAB), None)
            if strtab_address is None:
                return [], []
            # The string table's file offset: through the loadable segment that maps it.
            strtab = None
            for kind, _, offset, vaddr, _, filesz, _, _ in segments:
                if kind == 1 and vaddr <= strtab_address < vaddr + filesz:
                    strtab = strtab_address - vaddr + offset
            if strtab is None:
                return [], []

            def string(index):
                f.seek(strtab + index)
                data = f.read(4096)
                return data[:data.find(b"\0")].decode("utf-8", "replace")

            needed = [string(v) for t, v in entries if t == _DT_NEEDED]
            paths = [p for t, v in entries if t in (_DT_RPATH, _DT_RUNPATH)
                     for p in string(v).split(":") if p]
            origin = os.path.dirname(os.path.abspath(path))
            return needed, [p.replace("$ORIGIN", origin) for p in paths]
    except (OSError, struct.error, ValueError):
        return [], []


def _preload_dependencies(core_path):
    """Loads libringd's dependencies but protobuf with the usual binding (best effort: a library
    that cannot be found here is left to the deep-bound load, which names it if it fails)."""
    needed, paths = _dynamic_entries(core_path)
    libringd = next((n for n in needed if n.startswith("libringd.")), None)
    if libringd is None:
        return
    for directory in [os.path.dirname(core_path), *paths]:
        candidate = os.path.join(directory, libringd)
        if os.path.exists(candidate):
            break
    else:
        return
    for soname in _dynamic_entries(candidate)[0]:
        if soname.startswith(("libprotobuf", "libringd.")):
            continue
        try:
            ctypes.CDLL(soname)
        except OSError:
            pass


def load_core():
    """Imports and returns ringd._core (see the module's docstring)."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(here, "_core" + suffix)
        if os.path.exists(path):
            _preload_dependencies(path)
            break
    flags = sys.getdlopenflags()
    sys.setdlopenflags(flags | os.RTLD_DEEPBIND)
    try:
        from ringd import _core
    finally:
        sys.setdlopenflags(flags)
    return _core
