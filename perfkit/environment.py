"""The software a measurement depends on: package versions, the GPU driver (NVIDIA's, or AMD's amdgpu
under ROCm), the GPU runtime (CUDA or ROCm), perfkit's commit.

Used by the recorder (every recording's metadata) and by ``perfkit info``. Nothing here measures.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ._version import __version__
from .device_runtime import cuda_available, gpu_runtime, hip_version


def module_version(module: str) -> str | None:
    """``module.__version__`` if the module imports, else ``None`` (a broken install counts as absent)."""
    try:
        if importlib.util.find_spec(module) is None:
            return None
        mod = importlib.import_module(module)
    except Exception:  # noqa: BLE001
        return None
    version = getattr(mod, "__version__", None)
    return None if version is None else str(version)


def nvidia_driver_version() -> str | None:
    """The NVIDIA driver version (e.g. ``'580.95.05'``), or ``None`` without an NVIDIA driver.

    Tried in order: ``pynvml`` (nvidia-ml-py), then ``nvidia-smi``. torch reports the CUDA runtime
    version, not the driver's.
    """
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # noqa: BLE001  (not installed, no driver, no GPU)
        pass
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return lines[0] if lines else None


def _git(repo: Path, *args: str) -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def perfkit_commit() -> str | None:
    """``git rev-parse HEAD`` of the checkout perfkit runs from, plus ``-dirty`` when ``perfkit/`` has
    uncommitted changes; ``None`` outside a git checkout.

    A copy of the tree without ``.git`` (e.g. on a remote GPU machine) is told its commit by the
    ``PERFKIT_COMMIT`` environment variable, which then wins.
    """
    if os.environ.get("PERFKIT_COMMIT"):
        return os.environ["PERFKIT_COMMIT"].strip()
    repo = Path(__file__).resolve().parent.parent
    top = _git(repo, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != repo:
        return None  # perfkit is installed somewhere that is not its own checkout
    head = _git(repo, "rev-parse", "HEAD")
    if not head:
        return None  # no commit yet
    return head + ("-dirty" if _git(repo, "status", "--porcelain", "--", "perfkit") else "")


def cpu_model() -> str | None:
    """This CPU's model name (``/proc/cpuinfo``, else :func:`platform.processor`), or ``None``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def amd_driver_version() -> str | None:
    """The amdgpu kernel driver's version (``/sys/module/amdgpu/version``, e.g. ``'6.8.5'``: AMD's
    packaged driver has one, the driver built into a distribution's kernel does not), or ``None``."""
    try:
        return Path("/sys/module/amdgpu/version").read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def environment() -> dict[str, Any]:
    """Versions a recording depends on: ``driver`` (NVIDIA's; AMD's amdgpu under ROCm), ``cuda``
    (torch's CUDA runtime), ``hip`` (torch's ROCm/HIP version, :func:`perfkit.device_runtime.hip_version`),
    ``torch``, ``cupy``, ``triton``, ``perfkit``, ``perfkit_commit``, ``cuda_available`` (torch sees a GPU
    through ``torch.cuda``: CUDA or ROCm) and ``gpu_runtime`` (``"cuda"``, ``"rocm"`` or ``""``);
    ``None`` where a value does not apply or cannot be found."""
    torch_version = module_version("torch")
    cuda = None
    if torch_version is not None:
        import torch

        cuda = torch.version.cuda
    runtime = gpu_runtime()
    if runtime == "rocm":
        driver = amd_driver_version()
    else:
        driver = nvidia_driver_version() if runtime == "cuda" or shutil.which("nvidia-smi") else None
    return {
        "driver": driver,
        "cuda": cuda,
        "hip": hip_version(),
        "torch": torch_version,
        "cupy": module_version("cupy"),
        "triton": module_version("triton"),
        "perfkit": __version__,
        "perfkit_commit": perfkit_commit(),
        "cuda_available": cuda_available(),
        "gpu_runtime": runtime,
    }


__all__ = ["amd_driver_version", "cpu_model", "environment", "module_version", "nvidia_driver_version",
           "perfkit_commit"]
