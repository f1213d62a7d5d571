"""The GEMMs torch runs, per dtype: seeded operands, the call (cuBLAS on a GPU), and which dtypes a
device can run.

Shared by the book's experiments, the advisor's ``measure=True`` and the calibration
(:func:`perfkit.calibrate`). float8 uses ``torch._scaled_mm``, int8 ``torch._int_mm``; float32 runs
without TF32 and ``"tf32"`` with it. Operands live on :func:`perfkit.placement.tensor_device` (the
meta device for a pretend GPU). ``torch`` is imported when a function needs it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from ._validate import one_of, positive_int
from .device_runtime import gcn_arch, gpu_runtime
from .dtypes import canonical_dtype, torch_dtype
from .placement import runtime, tensor_device

__all__ = ["kernel_accepts", "matmul_fn", "matmul_operands", "rocm_refusal", "seeded_on", "supports_dtype",
           "tf32_mode"]


@contextlib.contextmanager
def tf32_mode(enabled: bool) -> Iterator[None]:
    """Temporarily allow (or forbid) TF32 Tensor Cores for float32 matmuls."""
    import torch

    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def supports_dtype(dtype: str, device: str) -> bool:
    """Whether this machine can run a GEMM in ``dtype`` on ``device`` through torch (a pretend GPU,
    ``placement.use(device="cuda", spec=...)``: the dtypes its spec has a peak for)."""
    import torch

    d = canonical_dtype(dtype)
    if device == "cpu":
        return d in ("float64", "float32", "bfloat16", "float16")
    pretend = runtime()
    if pretend.device == "cuda" and pretend.spec is not None:
        return d in pretend.spec.peaks
    major, minor = torch.cuda.get_device_capability()
    if d == "tf32" or d == "bfloat16":
        return major >= 8
    if d == "float8":
        if rocm_refusal(d, device):
            return False
        return (gpu_runtime() == "rocm" or (major, minor) >= (8, 9)) and hasattr(torch, "_scaled_mm")
    if d == "int8":
        return hasattr(torch, "_int_mm")
    return True


def rocm_refusal(dtype: str, device: str) -> str | None:
    """Why the ROCm GPU in use cannot time ``dtype`` as perfkit does, or None. perfkit times float8 as the OCP
    ``torch.float8_e4m3fn`` through ``torch._scaled_mm``; CDNA 3 (gfx94x: MI300X, MI325X) runs only the FNUZ
    variant, CDNA 4 (gfx950: MI350X, MI355X) the OCP one."""
    arch = gcn_arch() if device == "cuda" and gpu_runtime() == "rocm" else None
    if canonical_dtype(dtype) != "float8" or arch is None or not arch.startswith("gfx94"):
        return None
    return (f"{arch} runs FP8 only as float8_e4m3fnuz, and perfkit times float8 as the OCP float8_e4m3fn "
            "that torch._scaled_mm refuses there")


def kernel_accepts(M: Any, N: Any, K: Any, dtype: str) -> Any:
    """Whether torch's GEMM kernel for ``dtype`` takes an M×N×K product (elementwise on arrays):
    float8's ``torch._scaled_mm`` needs every side a multiple of 16, int8's ``torch._int_mm`` needs
    M > 16 and N and K multiples of 8; the other dtypes take any shape."""
    d = canonical_dtype(dtype)
    if d == "float8":
        return (M % 16 == 0) & (N % 16 == 0) & (K % 16 == 0)
    if d == "int8":
        return (M > 16) & (N % 8 == 0) & (K % 8 == 0)
    return True


def seeded_on(device: str, seed: int = 0) -> tuple[str, Any]:
    """``(on, gen)``: the torch device to allocate ``device``'s tensors on (``placement.tensor_device``:
    ``"meta"`` on a pretend GPU, shapes without storage) and a generator seeded with ``seed`` for it."""
    import torch

    on = tensor_device(device)
    return on, torch.Generator(device="cpu" if on == "meta" else on).manual_seed(seed)


def matmul_operands(M: int, N: int, K: int, dtype: str, device: str, layout: str = "NN"):
    """The operands ``(a, b)`` of an M×N×K GEMM: ``a`` is M×K and ``b`` K×N, seeded, in ``dtype``.

    ``layout`` is BLAS-style: the first letter says whether A is stored transposed (a transposed
    view of a contiguous K×M tensor), the second whether B is. float8 ``b`` is always column-major,
    as ``torch._scaled_mm`` requires, and so is int8 ``b``: cuBLAS's int8 kernels are built for it
    (on the H200, 2026-11-26, ``torch._int_mm`` at 8192³ ran at 949 TOP/s with B column-major and at
    127 TOP/s with B row-major).
    """
    import torch

    M, N, K = positive_int("M", M), positive_int("N", N), positive_int("K", K)
    d = canonical_dtype(dtype)
    layout = one_of("layout", layout, ("nn", "nt", "tn", "tt")).upper()
    if not supports_dtype(d, device):
        raise ValueError(f"dtype {d!r} GEMMs are not supported on this {device} by torch")
    on, gen = seeded_on(device)

    def operand(rows: int, cols: int, transposed: bool):
        shape = (cols, rows) if transposed else (rows, cols)
        if d == "int8":
            x = torch.randint(-8, 8, shape, generator=gen, device=on, dtype=torch.int8)
        else:
            x = torch.randn(shape, generator=gen, device=on, dtype=torch.float32).to(torch_dtype(d))
        return x.t() if transposed else x

    return operand(M, K, layout[0] == "T"), operand(K, N, layout[1] == "T" or d in ("float8", "int8"))


def matmul_fn(M: int, N: int, K: int, dtype: str, device: str, layout: str = "NN") -> Callable[[], Any]:
    """A zero-argument function computing an M×N×K GEMM with the vendor library (cuBLAS via torch).

    Operands from :func:`matmul_operands`. float8 uses ``torch._scaled_mm`` (unit scales, bfloat16
    output), int8 ``torch._int_mm`` (int32 output); float32 runs without TF32, tf32 with it.
    """
    import torch

    if not kernel_accepts(M, N, K, dtype):
        raise ValueError(f"M, N, K = {M}, {N}, {K}: torch's {canonical_dtype(dtype)} GEMM does not take this "
                         "shape (float8: every side a multiple of 16; int8: M > 16, N and K multiples of 8)")
    a, b = matmul_operands(M, N, K, dtype, device, layout)
    d = canonical_dtype(dtype)
    if d == "float8":
        one = torch.ones((), device=tensor_device(device), dtype=torch.float32)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    if d == "int8":
        return lambda: torch._int_mm(a, b)
    if d in ("tf32", "float32") and device == "cuda":
        allow = d == "tf32"

        def run():
            with tf32_mode(allow):
                return torch.matmul(a, b)

        return run
    return lambda: torch.matmul(a, b)
