"""A Triton GEMM whose output tile *you* choose: :func:`tiled_matmul`.

It computes C = A·B with one Triton program per BM×BN output tile, so the tile count and the waves
it makes are known exactly (cuBLAS picks its tiles internally). It runs compiled on CUDA tensors
and under Triton's interpreter on CPU tensors (slow, but exact), so the chapters' code also runs
on a laptop. triton is imported only when a kernel runs: ``import perfkit`` does not import it.

Triton's interpreter and ``TRITON_INTERPRET``
---------------------------------------------
``@triton.jit`` reads ``TRITON_INTERPRET`` when it *decorates* a function: with ``1`` it returns
an interpreted function, otherwise a compiled one. perfkit therefore builds its kernel lazily, once
per mode, setting ``TRITON_INTERPRET`` only around that decoration and around each interpreted
launch (and restoring it after). CPU tensors always go to the interpreted build; CUDA tensors go to
the compiled build unless ``TRITON_INTERPRET=1`` was set by you (then the interpreter runs them,
copying through the host). When no CUDA GPU is visible and triton has not been imported yet,
perfkit also sets ``TRITON_INTERPRET=1`` for the whole process before importing triton, so every
Triton kernel in the process (Triton's own standard-library functions included) is built for the
interpreter. Triton's ``@jit`` library helpers (``tl.zeros``, ``tl.sum``, …) are built in whatever
mode was in force when triton was imported, so the kernel uses only builtins (``tl.full``,
``tl.where``, ``tl.dot``, …) and runs in either mode whatever the import order. Since Triton 3.6
the interpreter undoes its patches of ``triton.language`` after each launch, so compiled and
interpreted launches can alternate in one process.

Older Triton interpreters (3.6.0 among them) turn a runtime int argument, such as the kernel's
``K`` in ``range(0, K, BLOCK_K)``, into a Python int with ``int()`` of a 1-element NumPy array,
which NumPy has deprecated since 1.25 and now refuses (2.4.6 and 2.5.2 raise TypeError); newer
Triton (3.9.0) squeezes the array first. When both are installed (:func:`_interpreter_index_bug`),
perfkit mends the interpreter's ``tensor.__index__`` for the duration of each interpreted launch.

On ROCm
-------
The kernel runs compiled on an AMD GPU too (torch's ROCm build: tensors on device ``"cuda"``, Triton's
HIP backend). It is portable Triton: ``tl.load``/``tl.dot``/``tl.store`` on masked pointers, no inline
PTX, no CUDA library, no NVIDIA-only feature (TMA, warp specialization), so nothing in it is CUDA-only
and it is not skipped there. Two things differ. ``num_warps`` counts 64-lane wavefronts (4 → 256
threads); the tile, the program count and the waves are the same. And Triton's HIP backend accepts
``input_precision="tf32"`` (XF32) only on CDNA 3 (gfx942), so 16-bit inputs (for which the setting
changes nothing) are passed ``"ieee"`` on ROCm, and float32 with ``"tf32"`` elsewhere is refused by
Triton (re-raised naming the GPU).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import inspect
import os
import sys
import threading
import warnings
from typing import Iterator

import numpy as np

from .._validate import one_of, positive_int, power_of_two, tile_pair
from ..device_runtime import cuda_available, gcn_arch, gpu_runtime
from ..quantization import cdiv

_TILE_SIZES = (16, 32, 64, 128, 256)
_PRECISIONS = ("ieee", "tf32")
_TRUE = ("1", "true", "on", "yes")
_env_lock = threading.RLock()


def _env_interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in _TRUE


def _triton_installed() -> bool:
    if "triton" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


def triton_mode(device: str | None = None) -> str | None:
    """How :func:`tiled_matmul` runs Triton here: ``"compiled"``, ``"interpreter"`` or ``None``.

    ``None`` means triton is not installed. ``device`` is ``"cuda"`` or ``"cpu"`` (the tensors'
    device); by default the device perfkit measures on (CUDA when a GPU is visible). CPU tensors
    always run under the interpreter; CUDA tensors run compiled unless ``TRITON_INTERPRET=1`` is
    set. Calling this function does not import triton.
    """
    if device is not None:
        device = one_of("device", device, ("cuda", "cpu"))
    if not _triton_installed():
        return None
    if device is None:
        device = "cuda" if cuda_available() else "cpu"
    if device == "cpu" or _env_interpret():
        return "interpreter"
    return "compiled"


@contextlib.contextmanager
def _interpret_env(interpret: bool) -> Iterator[None]:
    """Set TRITON_INTERPRET to 1/0 for the duration of the block, then restore it."""
    with _env_lock:
        old = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("TRITON_INTERPRET", None)
            else:
                os.environ["TRITON_INTERPRET"] = old


def _import_triton():
    """Import triton (setting TRITON_INTERPRET=1 first on a machine without a CUDA GPU)."""
    if "triton" not in sys.modules and not cuda_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        import triton
        import triton.language as tl
    except ImportError as e:  # not installed, or a broken install
        raise RuntimeError(
            "tiled_matmul needs Triton (pip install triton; it ships with torch on Linux). "
            f"Importing it failed: {e}") from None
    return triton, tl


#: The interpreter's tensor.__index__ before Triton squeezed the array (as in Triton 3.6.0's interpreter.py).
_OLD_INDEX = "lambda self: int(self.handle.data))"


@functools.cache
def _interpreter_index_bug() -> bool:
    """True when Triton's interpreter cannot turn a runtime int argument into a Python int here.

    That is: this NumPy refuses ``int()`` of a 1-element 1-D array, and the installed interpreter's
    ``tensor.__index__`` still does exactly that (``int(self.handle.data)``, not ``.squeeze()`` first).
    False whenever either cannot be told (triton missing, its source unreadable, …). Checked once.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # NumPy 1.25 … : warns, still converts
            int(np.array([1]))
        return False
    except TypeError:
        pass
    except Exception:
        return False
    try:
        _import_triton()
        import triton.runtime.interpreter as interpreter
        return _OLD_INDEX in inspect.getsource(interpreter)
    except Exception:
        return False


def _squeezed_index(self) -> int:
    """``tensor.__index__`` under the interpreter: the scalar held in a 1-element array of any shape."""
    return int(self.handle.data.squeeze())


@contextlib.contextmanager
def _interpreter_index_fix() -> Iterator[None]:
    """Around one interpreted launch: mend the interpreter's ``tensor.__index__`` where it is broken.

    The interpreter patches ``triton.language.tensor`` at each launch through
    ``_patch_lang_tensor(tensor, scope)`` and undoes the patches after it. Where
    :func:`_interpreter_index_bug` holds, that hook is wrapped, for this block only, so that it then
    sets a ``__index__`` that squeezes the array first (undone with the interpreter's own patches).
    Raises RuntimeError, before anything runs, where the hook is not there to wrap.
    """
    if not _interpreter_index_bug():
        yield
        return
    triton, _ = _import_triton()
    import triton.runtime.interpreter as interpreter

    original = getattr(interpreter, "_patch_lang_tensor", None)
    try:
        hook_ok = callable(original) and list(inspect.signature(original).parameters) == ["tensor", "scope"]
    except (TypeError, ValueError):
        hook_ok = False
    if not hook_ok:
        raise RuntimeError(
            f"triton {getattr(triton, '__version__', '?')}'s interpreter cannot run under NumPy {np.__version__} "
            "(its tensor.__index__ calls int() on a 1-element array, which this NumPy refuses, and perfkit "
            "found no _patch_lang_tensor(tensor, scope) hook to mend it): upgrade triton (3.9.0 runs fine) "
            "or use an older NumPy, one that only warns about that conversion")

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", _squeezed_index)

    # What unittest.mock.patch.object does, without importing unittest.mock (and asyncio) with perfkit.kernels.
    interpreter._patch_lang_tensor = patch_lang_tensor
    try:
        yield
    finally:
        interpreter._patch_lang_tensor = original


@functools.lru_cache(maxsize=2)
def _kernel(mode: str):
    """The Triton kernel, decorated for ``mode`` ("compiled" or "interpreter"); built once per mode."""
    triton, tl = _import_triton()
    with _interpret_env(mode == "interpreter"):
        @triton.jit
        def _tiled_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                                 stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                 GROUP_M: tl.constexpr, INPUT_PRECISION: tl.constexpr,
                                 UPCAST: tl.constexpr):
            # One program per BLOCK_M×BLOCK_N output tile. Programs are numbered in groups of
            # GROUP_M tile rows (the usual L2-friendly order); the tiles, their count and their
            # size are unchanged by the order.
            pid = tl.program_id(0)
            num_pid_m = (M + BLOCK_M - 1) // BLOCK_M
            num_pid_n = (N + BLOCK_N - 1) // BLOCK_N
            pids_per_group = GROUP_M * num_pid_n
            group = pid // pids_per_group
            first_m = group * GROUP_M
            group_rows = num_pid_m - first_m
            group_rows = tl.where(group_rows < GROUP_M, group_rows, GROUP_M)
            pid_m = first_m + (pid % pids_per_group) % group_rows
            pid_n = (pid % pids_per_group) // group_rows

            offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            offs_k = tl.arange(0, BLOCK_K)
            mask_m = offs_m < M
            mask_n = offs_n < N
            a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
            b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
            acc = tl.full((BLOCK_M, BLOCK_N), 0.0, dtype=tl.float32)  # a builtin (tl.zeros is @jit)
            for k0 in range(0, K, BLOCK_K):
                mask_k = (k0 + offs_k) < K
                a = tl.load(a_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
                b = tl.load(b_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
                if UPCAST:  # interpreter only (see tiled_matmul): bf16 products are exact in fp32
                    a = a.to(tl.float32)
                    b = b.to(tl.float32)
                acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
                a_ptrs += BLOCK_K * stride_ak
                b_ptrs += BLOCK_K * stride_bk
            c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
            tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])

    built = "interpreter" if type(_tiled_matmul_kernel).__name__ == "InterpretedFunction" else "compiled"
    if built != mode:
        _kernel.cache_clear()
        raise RuntimeError(
            f"Triton built the tiled_matmul kernel in {built} mode although {mode} mode was asked for "
            "(triton.knobs.runtime.interpret may have been set in code). Restart the Python process; "
            "set TRITON_INTERPRET=1 before importing triton to run on the CPU, and leave it unset for a GPU.")
    return _tiled_matmul_kernel


def _precision_16bit(mode: str, runtime: str) -> str:
    """The ``input_precision`` passed with 16-bit inputs (which it does not change): Triton's default
    ``"tf32"`` compiled on CUDA; ``"ieee"`` under the interpreter and on ROCm, whose Triton accepts
    ``"tf32"`` only on gfx942 (module notes)."""
    return "ieee" if mode == "interpreter" or runtime == "rocm" else "tf32"


def tiled_matmul(a, b, tile=(64, 64), block_k: int = 32, *, num_warps: int = 4, num_stages: int = 3,
                 input_precision: str | None = None):
    """C = A·B with a Triton kernel whose output tile is forced to ``tile = (BM, BN)``.

    One Triton program computes one BM×BN tile of C, so the launch has exactly
    ``cdiv(M, BM) · cdiv(N, BN)`` programs; each walks K in steps of ``block_k`` and accumulates in
    float32. Every edge is masked, so any shape works (odd M, N, K; K < block_k; a matrix smaller
    than one tile).

    Args:
        a, b: 2-D torch tensors, M×K and K×N, same dtype (float16, bfloat16 or float32) and same
            device. Any strides are accepted.
        tile: ``(BM, BN)``, each a power of two in 16…256.
        block_k: the K step, a power of two ≥ 16.
        num_warps, num_stages: Triton launch options (compiled mode only; the interpreter ignores
            them). Large tiles need more warps (e.g. 8 for 256×128) and fewer stages to fit in
            shared memory.
        input_precision: for float32 inputs, ``"ieee"`` (true float32 products, the default) or
            ``"tf32"`` (TF32 Tensor Cores on a GPU). Ignored for 16-bit inputs.

    Returns:
        C, an M×N tensor of the inputs' dtype on their device.

    CUDA tensors run compiled; CPU tensors run under Triton's interpreter (see the module notes).
    """
    import torch

    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{name} must be a 2-D matrix, got a {t.dim()}-D tensor of shape {tuple(t.shape)}")
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise ValueError(f"inner dimensions differ: a is {M}×{K} and b is {K2}×{N}; "
                         f"a.shape[1] ({K}) must equal b.shape[0] ({K2})")
    supported = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
    if a.dtype not in supported:
        raise ValueError(f"a has dtype {a.dtype}; tiled_matmul supports float16, bfloat16 and float32")
    if b.dtype != a.dtype:
        raise ValueError(f"a and b must have the same dtype, got a: {a.dtype}, b: {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"a and b must be on the same device, got a: {a.device}, b: {b.device}")
    if a.device.type not in ("cuda", "cpu"):
        raise ValueError(f"tiled_matmul runs on CUDA or CPU tensors, got device {a.device}")
    BM, BN = tile_pair("tile", tile)
    BM = power_of_two("tile[0]", BM, 16, 256)
    BN = power_of_two("tile[1]", BN, 16, 256)
    BK = power_of_two("block_k", block_k, 16, None)
    num_warps = power_of_two("num_warps", num_warps, 1, 32)
    num_stages = positive_int("num_stages", num_stages)
    input_precision = one_of("input_precision", "ieee" if input_precision is None else input_precision,
                             _PRECISIONS)
    if a.dtype != torch.float32:
        input_precision = None  # 16-bit inputs: Tensor Cores either way (Triton's default setting)
    if max(a.numel(), b.numel(), M * N) >= 2**31:
        raise ValueError(f"a {M}×{K} by {K}×{N} GEMM is too large for tiled_matmul (it uses 32-bit offsets; "
                         "every matrix must have fewer than 2**31 elements)")

    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()

    on_cpu = a.device.type == "cpu"
    if not _triton_installed():
        raise RuntimeError("tiled_matmul needs Triton (pip install triton); it is not installed here. "
                           "Use torch.matmul, or show the recorded data.")
    mode = "interpreter" if on_cpu or _env_interpret() else "compiled"
    kernel = _kernel(mode)
    grid = (cdiv(M, BM) * cdiv(N, BN),)
    args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    rocm = mode == "compiled" and gpu_runtime() == "rocm"
    meta = dict(BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=8,
                INPUT_PRECISION=input_precision or _precision_16bit(mode, "rocm" if rocm else "cuda"),
                UPCAST=mode == "interpreter" and a.dtype == torch.bfloat16,
                num_warps=num_warps, num_stages=num_stages)
    if mode == "interpreter":
        # The interpreter mishandles bfloat16 (its dot misreads bfloat16 operands and its float32 →
        # bfloat16 conversion truncates): upcast the tiles in the kernel, accumulate into a
        # float32 C and let torch round it to bfloat16 (to nearest, as the GPU does).
        out = torch.empty((M, N), dtype=torch.float32, device=a.device) if a.dtype == torch.bfloat16 else c
        args = (a, b, out, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                out.stride(0), out.stride(1))
        with _interpret_env(True), _interpreter_index_fix():
            kernel[grid](*args, **meta)
        if out is not c:
            c.copy_(out)
    else:
        try:
            with torch.cuda.device(a.device):
                kernel[grid](*args, **meta)
        except Exception as e:
            if type(e).__name__ == "OutOfResources":  # triton.runtime.errors.OutOfResources
                raise RuntimeError(
                    f"tile {BM}×{BN} with block_k={BK}, num_stages={num_stages} and {a.dtype} needs more "
                    f"on-chip memory than this GPU has ({e}); use fewer num_stages, a smaller block_k or "
                    "a smaller tile") from e
            if rocm and meta["INPUT_PRECISION"] == "tf32" and "input_precision" in str(e):
                raise ValueError(f"input_precision='tf32': Triton does not run TF32 (XF32) dots on this AMD "
                                 f"GPU ({gcn_arch()}; only CDNA 3, gfx942, has them): use 'ieee' ({e})") from e
            raise
    return c


__all__ = ["tiled_matmul", "triton_mode"]
