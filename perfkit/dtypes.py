"""Data types: the names perfkit accepts, their sizes, and their torch equivalents.

Everywhere in perfkit a dtype may be given as one of the names in :data:`DTYPES` or as the
matching ``torch.dtype``. ``"tf32"`` is not a storage type: its tensors are float32 (4 bytes per
element) multiplied on TF32 Tensor Cores.
"""

from __future__ import annotations

from typing import Any

#: Canonical dtype names, widest first.
DTYPES: tuple[str, ...] = ("float64", "float32", "tf32", "float16", "bfloat16", "float8", "int8")

_ITEMSIZE = {"float64": 8, "float32": 4, "tf32": 4, "float16": 2, "bfloat16": 2, "float8": 1, "int8": 1}

_ALIASES = {
    "fp64": "float64", "double": "float64",
    "fp32": "float32", "float": "float32",
    "fp16": "float16", "half": "float16",
    "bf16": "bfloat16",
    "fp8": "float8", "float8_e4m3fn": "float8", "float8_e4m3": "float8", "e4m3": "float8",
}

_TORCH_NAMES = {  # torch.dtype attribute name -> canonical name
    "float64": "float64", "float32": "float32", "float16": "float16", "bfloat16": "bfloat16",
    "float8_e4m3fn": "float8", "float8_e5m2": "float8", "int8": "int8",
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


def itemsize(dtype: Any) -> int:
    """Bytes per element of ``dtype`` (tf32 tensors are stored as float32: 4 bytes)."""
    return _ITEMSIZE[canonical_dtype(dtype)]


def output_itemsize(dtype: Any) -> int:
    """Bytes per element of a GEMM's output C for inputs of ``dtype``: int8 accumulates and writes
    int32 (4 bytes), float8 writes a 2-byte (bfloat16) result, other dtypes write their own size."""
    name = canonical_dtype(dtype)
    return {"int8": 4, "float8": 2}.get(name, _ITEMSIZE[name])


def torch_dtype(dtype: Any):
    """The ``torch.dtype`` that stores ``dtype`` (tf32 → ``torch.float32``, float8 → ``torch.float8_e4m3fn``)."""
    import torch

    name = canonical_dtype(dtype)
    return {
        "float64": torch.float64, "float32": torch.float32, "tf32": torch.float32,
        "float16": torch.float16, "bfloat16": torch.bfloat16,
        "float8": torch.float8_e4m3fn, "int8": torch.int8,
    }[name]
