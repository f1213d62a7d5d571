"""Data types: the names perfkit accepts, their sizes, and their torch equivalents.

Everywhere in perfkit a dtype may be given as one of the names in :data:`DTYPES` or as the
matching ``torch.dtype``. ``"tf32"`` is not a storage type: its tensors are float32 (4 bytes per
element) multiplied on TF32 Tensor Cores (AMD calls it XF32).

``"float6"`` and ``"float4"`` are the block-scaled micro-formats of Blackwell and CDNA 4: 6-bit
(e2m3/e3m2) or 4-bit (e2m1) elements with one shared scale per block, MXFP6 / MXFP4 (OCP microscaling:
an 8-bit power-of-two scale per 32 elements) and NVFP4 (an e4m3 scale per 16 elements, and a float32
one per tensor). :func:`itemsize` is their payload (0.75 and 0.5 bytes), :func:`scale_itemsize` the
block scales' share per element (NVFP4's 1/16 byte for float4, MXFP6's 1/32 for float6).
"""

from __future__ import annotations

from typing import Any

#: Canonical dtype names, widest first.
DTYPES: tuple[str, ...] = ("float64", "float32", "tf32", "float16", "bfloat16", "float8", "int8", "float6",
                           "float4")

#: The block-scaled micro-formats (:func:`scale_itemsize`).
BLOCK_SCALED: tuple[str, ...] = ("float6", "float4")

_ITEMSIZE = {"float64": 8, "float32": 4, "tf32": 4, "float16": 2, "bfloat16": 2, "float8": 1, "int8": 1,
             "float6": 0.75, "float4": 0.5}
_SCALE_ITEMSIZE = {"float6": 1 / 32, "float4": 1 / 16}

_ALIASES = {
    "fp64": "float64", "double": "float64",
    "fp32": "float32", "float": "float32",
    "fp16": "float16", "half": "float16",
    "bf16": "bfloat16",
    "fp8": "float8", "float8_e4m3fn": "float8", "float8_e4m3": "float8", "e4m3": "float8",
    "float8_e4m3fnuz": "float8", "float8_e5m2": "float8", "float8_e5m2fnuz": "float8",
    "xf32": "tf32",
    "fp6": "float6", "mxfp6": "float6", "float6_e2m3": "float6", "float6_e3m2": "float6",
    "fp4": "float4", "nvfp4": "float4", "mxfp4": "float4", "float4_e2m1": "float4", "float4_e2m1fn_x2": "float4",
}

_TORCH_NAMES = {  # torch.dtype attribute name -> canonical name
    "float64": "float64", "float32": "float32", "float16": "float16", "bfloat16": "bfloat16",
    "float8_e4m3fn": "float8", "float8_e5m2": "float8", "float8_e4m3fnuz": "float8", "float8_e5m2fnuz": "float8",
    "int8": "int8", "float4_e2m1fn_x2": "float4",
}


def canonical_dtype(dtype: Any) -> str:
    """Return the canonical perfkit name for ``dtype`` (a name or a ``torch.dtype``).

    Raises ``TypeError`` for something that is not a dtype and ``ValueError`` for an unknown name.
    """
    accepted = ", ".join(repr(d) for d in DTYPES)
    if isinstance(dtype, str):
        key = dtype.strip().lower()
        key = _ALIASES.get(key, key)
        if key in _ITEMSIZE:
            return key
        raise ValueError(f"dtype {dtype!r} is not known; accepted: {accepted} (or the matching torch dtype)")
    if type(dtype).__name__ == "dtype" and type(dtype).__module__ == "torch":
        name = str(dtype).removeprefix("torch.")
        if name in _TORCH_NAMES:
            return _TORCH_NAMES[name]
        raise ValueError(f"dtype {dtype} is not supported; accepted: {accepted}")
    raise TypeError(f"dtype must be a name such as 'float16' or a torch.dtype, got {dtype!r}; accepted: {accepted}")


def itemsize(dtype: Any) -> int | float:
    """Bytes per element of ``dtype`` (tf32 tensors are stored as float32: 4 bytes; float6 and float4
    elements take 0.75 and 0.5 bytes, their block scales not counted: :func:`scale_itemsize`)."""
    return _ITEMSIZE[canonical_dtype(dtype)]


def scale_itemsize(dtype: Any) -> int | float:
    """Bytes of block scale per element of a block-scaled ``dtype`` (0 for the others): float4 is
    counted as NVFP4 (one byte per 16 elements; MXFP4's 1/32 is less), float6 as MXFP6 (1/32)."""
    return _SCALE_ITEMSIZE.get(canonical_dtype(dtype), 0)


def output_itemsize(dtype: Any) -> int:
    """Bytes per element of a GEMM's output C for inputs of ``dtype``: int8 accumulates and writes
    int32 (4 bytes), float8, float6 and float4 write a 2-byte (bfloat16) result, other dtypes write
    their own size."""
    name = canonical_dtype(dtype)
    return {"int8": 4, "float8": 2, "float6": 2, "float4": 2}.get(name, _ITEMSIZE[name])


def torch_dtype(dtype: Any):
    """The ``torch.dtype`` that stores ``dtype`` (tf32 → ``torch.float32``, float8 → ``torch.float8_e4m3fn``).
    float6 and float4 have no torch storage perfkit can time with: ``ValueError``."""
    import torch

    name = canonical_dtype(dtype)
    if name in BLOCK_SCALED:
        raise ValueError(f"dtype {name!r} is a block-scaled micro-format: perfkit models it but has no torch "
                         "dtype to time it with; time 'float8' or 'bfloat16' instead")
    return {
        "float64": torch.float64, "float32": torch.float32, "tf32": torch.float32,
        "float16": torch.float16, "bfloat16": torch.bfloat16,
        "float8": torch.float8_e4m3fn, "int8": torch.int8,
    }[name]
