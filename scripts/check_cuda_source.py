"""Compile perfkit's CUDA sources to PTX with NVRTC, without a GPU (a developer's check).

NVRTC (NVIDIA's runtime compiler, what CuPy's RawKernel uses) compiles CUDA C++ on any Linux
machine; only the compiled code needs a GPU. This script loads ``libnvrtc.so*`` through ctypes,
from a CUDA toolkit (``$CUDA_PATH``/``$CUDA_HOME``, /usr/local/cuda) or from NVIDIA's pip wheels,
for example::

    pip install nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cuda-cccl   # not in requirements

and compiles every kernel variant perfkit can launch for each architecture asked (default sm_90
and sm_75) to PTX and, through the ptxas inside NVRTC, to SASS, with the options CuPy passes
(``-ftz=true``, ``--device-c`` for cooperative kernels, the CUDA include folders, then the
kernel's own ``--std`` and defines). An error, a warning or a register spill fails the check.

    python scripts/check_cuda_source.py [--arch 90 --arch 75] [--quick]
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import re
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADERS = ("cooperative_groups.h", "cuda_fp16.h")


@dataclass(frozen=True)
class Nvrtc:
    """A loaded NVRTC library and the include directories that hold the CUDA headers."""

    lib: ctypes.CDLL
    path: str
    includes: tuple[str, ...]

    def version(self) -> tuple[int, int]:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        return major.value, minor.value


def _roots() -> list[Path]:
    """Folders that may hold a CUDA toolkit or NVIDIA's wheels, most specific first."""
    roots = [Path(os.environ[v]) for v in ("CUDA_PATH", "CUDA_HOME") if os.environ.get(v)]
    for key in ("purelib", "platlib"):
        roots.append(Path(sysconfig.get_paths()[key]) / "nvidia")
    roots += [Path(p) / "nvidia" for p in sys.path if p.endswith("site-packages")]
    roots.append(Path("/usr/local/cuda"))
    seen, found = set(), []
    for r in roots:
        if r.is_dir() and r.resolve() not in seen:
            seen.add(r.resolve())
            found.append(r)
    return found


def _load(lib_path: str) -> ctypes.CDLL | None:
    # NVRTC dlopens its builtins library by name: load it first from the same folder.
    for builtins in sorted(glob.glob(str(Path(lib_path).parent / "libnvrtc-builtins.so*"))):
        if ".alt." not in builtins:
            try:
                ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                pass
    try:
        return ctypes.CDLL(lib_path)
    except OSError:
        return None


def find_nvrtc() -> Nvrtc | None:
    """NVRTC and, from the same toolkit or wheel folder, the include folders that hold
    cooperative_groups.h, cuda_fp16.h and CCCL's nv/target; None when there is none."""
    for root in _roots():
        libs = sorted(p for p in glob.glob(str(root / "**" / "libnvrtc.so*"), recursive=True)
                      if "builtins" not in p and ".alt." not in p)
        includes: list[str] = []
        for header in HEADERS + ("nv/target",):
            for p in sorted(glob.glob(str(root / "**" / header), recursive=True)):
                folder = str(Path(p).parent.parent if "/" in header else Path(p).parent)
                if folder not in includes:
                    includes.append(folder)
        have = {h for h in HEADERS if any((Path(d) / h).is_file() for d in includes)}
        if not libs or have != set(HEADERS):
            continue
        for path in libs:
            lib = _load(path)
            if lib is not None:
                return Nvrtc(lib, path, tuple(includes))
    return None


def compile_ptx(nvrtc: Nvrtc, source: str, name: str, options: tuple[str, ...]) -> tuple[str, str]:
    """(PTX, compiler log) for ``source``; raises RuntimeError with the log when it fails."""
    lib = nvrtc.lib
    prog = ctypes.c_void_p()
    err = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), f"{name}.cu".encode(), 0, None, None)
    if err:
        raise RuntimeError(f"nvrtcCreateProgram failed with code {err}")
    try:
        opts = [o.encode() for o in options]
        array = (ctypes.c_char_p * len(opts))(*opts)
        status = lib.nvrtcCompileProgram(prog, len(opts), array)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace").strip()
        if status:
            raise RuntimeError(f"{name}: NVRTC error {status} with options {' '.join(options)}:\n{log}")
        lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetPTX(prog, ptx)
        return ptx.value.decode(), log
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def variants(quick: bool = False) -> list[tuple[str, str, str, tuple[str, ...], bool]]:
    """(label, source, kernel name, extra options, cooperative) for every kernel perfkit launches.

    ``quick``: only the smallest and largest batch tile at 256 threads (what the tests compile).
    """
    sys.path.insert(0, str(ROOT))
    import importlib

    cupy_spin = importlib.import_module("perfkit.kernels.cupy_spin")
    prnn = importlib.import_module("perfkit.kernels.cupy_rnn")

    found = [("cupy_spin", cupy_spin._SPIN_SOURCE, "perfkit_spin", (), False)]
    for tile in (1, prnn.MAX_BATCH_TILE) if quick else (1, 2, 4, prnn.MAX_BATCH_TILE):
        for threads in (256,) if quick else (128, 256):
            found.append((f"persistent_rnn batch_tile={tile} threads={threads}", prnn._SOURCE,
                          prnn._KERNEL_NAME, prnn._options(tile, threads), True))
    return found


def _ptxas_stats(log: str) -> tuple[int, int, list[str]]:
    """(registers, spill bytes, unexpected lines) from NVRTC's log with ``-Xptxas=-v``."""
    regs = max((int(m) for m in re.findall(r"Used (\d+) registers", log)), default=0)
    spills = sum(int(m) for m in re.findall(r"(\d+) bytes spill (?:stores|loads)", log))
    other = [line for line in log.splitlines() if line.strip() and not line.startswith("ptxas")]
    other += [line for line in log.splitlines() if re.search(r"warning|error", line, re.IGNORECASE)]
    return regs, spills, other


def check(nvrtc: Nvrtc, archs: tuple[str, ...] = ("90", "75"), quick: bool = False) -> list[str]:
    """Compile every variant for every architecture (PTX, then SASS through NVRTC's ptxas).

    Returns one line per compilation. Raises RuntimeError on an error, on any warning in
    NVRTC's log, on register spills, or when the kernel's entry is missing from the PTX.
    """
    lines = []
    for arch in archs:
        for label, source, name, extra, cooperative in variants(quick):
            # As CuPy compiles a RawKernel: -ftz=true, --device-c for cooperative groups, the
            # CUDA include folders, then the kernel's own options (its --std and defines).
            std = () if any("std=" in o for o in extra) else ("--std=c++14",)  # CuPy's default
            options = (f"--gpu-architecture=sm_{arch}", "-Xptxas=-v", "-ftz=true", *std,
                       *(("--device-c",) if cooperative else ()),
                       *(f"-I{d}" for d in nvrtc.includes), *extra)
            ptx, log = compile_ptx(nvrtc, source, name, options)
            regs, spills, other = _ptxas_stats(log)
            if other or spills:
                raise RuntimeError(f"{label} (sm_{arch}): {spills} bytes of spills; messages:\n{log}")
            if f".entry {name}" not in ptx:
                raise RuntimeError(f"{label} (sm_{arch}): no entry {name} in the PTX")
            lines.append(f"ok  sm_{arch}  {label}: {len(ptx.splitlines())} PTX lines, {regs} registers, "
                         "no spills")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", action="append", help="compute capability such as 90 (repeatable)")
    parser.add_argument("--quick", action="store_true", help="compile only two variants of each kernel")
    args = parser.parse_args(argv)
    nvrtc = find_nvrtc()
    if nvrtc is None:
        print("NVRTC not found: pip install nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cuda-cccl",
              file=sys.stderr)
        return 2
    print(f"NVRTC {'.'.join(map(str, nvrtc.version()))} from {nvrtc.path}")
    try:
        for line in check(nvrtc, tuple(args.arch or ("90", "75")), quick=args.quick):
            print(line)
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
