"""Which GEMM dimensions must be aligned: the operands' leading (contiguous) dimensions, and how far.

A GEMM library's fastest kernels load each operand in 16-byte vectors (Hopper: TMA; Ampere:
``cp.async`` of 16 bytes), which needs the **stride between the rows of every operand** (its leading
dimension) to be a multiple of 16 bytes. When one is not, cuBLAS falls back to a kernel family
that loads with the widest vector the stride allows: 4 or 8 bytes (``cp.async`` still works), or,
below 4 bytes (an odd number of 2-byte elements), no asynchronous copy at all. Only leading
dimensions matter: the other dimension of an operand is a row count, which tiles absorb.

The layout names which dimension of each operand is contiguous, in torch's row-major terms (as
:func:`perfkit.matmul.matmul_operands` builds operands), for ``C[M×N] = A[M×K]·B[K×N]``:

- first letter, A: ``N`` → A stored M×K (leading dimension K); ``T`` → stored K×M (leading M);
- second letter, B: ``N`` → B stored K×N (leading N); ``T`` → stored N×K (leading K);
- optional third letter, C: ``N`` (default) → C stored M×N (leading N); ``T`` → N×M (leading M).

``torch.matmul`` of contiguous tensors is ``"NN"``. ``nn.Linear`` in :func:`perfkit.linear_gemms`'
convention (forward ``(M, N, K) = (out, tokens, in)``) is :data:`LINEAR_LAYOUTS`: ``in`` and ``out``
are leading dimensions in every pass, ``tokens`` never is. An empty layout (``""``) means unknown:
every one of M, N and K is treated as a leading dimension (the rule before layouts were modelled).
An operand with an extent of 1 (a vector) has no stride to align. Units: bytes.
"""

from __future__ import annotations

from typing import Any

from .dtypes import itemsize, output_itemsize

__all__ = ["ALIGNED_BYTES", "ASYNC_COPY_BYTES", "LINEAR_LAYOUTS", "MATMUL_LAYOUTS", "alignment_bytes",
           "alignment_class", "check_layout", "from_column_major", "leading_dims", "narrowest_alignment"]

#: Bytes of a leading dimension that let the library use its fastest (16-byte vector) kernels.
ALIGNED_BYTES = 16

#: The narrowest asynchronous copy (Ampere's ``cp.async`` takes 4, 8 or 16 bytes): a leading
#: dimension aligned to fewer bytes forces register-staged loads (the "narrow" class).
ASYNC_COPY_BYTES = 4

#: Layout of each pass of ``nn.Linear`` in :func:`perfkit.linear_gemms`' convention. forward
#: ``(out, tokens, in)``: A = W (out×in) "N", B = xᵀ (x is tokens×in) "T", C = yᵀ (y is tokens×out)
#: "T". dgrad ``(in, tokens, out)``: A = Wᵀ "T", B = dyᵀ "T", C = dxᵀ "T". wgrad ``(in, out, tokens)``:
#: A = xᵀ "T", B = dy "N", C = dWᵀ (dW is out×in) "T".
LINEAR_LAYOUTS: dict[str, str] = {"forward": "NTT", "dgrad": "TTT", "wgrad": "TNT"}

#: Layout of each pass of ``a @ b`` with contiguous a (M×K), b (K×N) and their gradients:
#: forward ``(M, N, K)`` "NN"; dgrad ``(M, K, N)``: dC·bᵀ "NT"; wgrad ``(K, N, M)``: aᵀ·dC "TN".
MATMUL_LAYOUTS: dict[str, str] = {"forward": "NN", "dgrad": "NT", "wgrad": "TN"}


def check_layout(layout: Any) -> str:
    """``layout`` upper-cased: two or three of ``N``/``T`` (A, B, optionally C), or ``""`` (unknown)."""
    if not isinstance(layout, str):
        raise TypeError(f"layout must be a string such as 'NN', 'NT' or 'NTT' (or '' for unknown), got {layout!r}")
    lay = layout.upper()
    if lay and (len(lay) not in (2, 3) or set(lay) - {"N", "T"}):
        raise ValueError(f"layout must be two or three letters N/T (A, B, optionally C; e.g. 'NN', 'NTT'), "
                         f"or '' for unknown, got {layout!r}")
    return lay


def leading_dims(layout: str) -> tuple[str, str, str] | None:
    """The leading dimension ("M", "N" or "K") of A, B and C under ``layout``; None if it is unknown ("")."""
    lay = check_layout(layout)
    if not lay:
        return None
    c = lay[2] if len(lay) == 3 else "N"
    return ("K" if lay[0] == "N" else "M", "N" if lay[1] == "N" else "K", "N" if c == "N" else "M")


def from_column_major(layout: str) -> str:
    """A cuBLAS (column-major) layout such as DeepBench's ``"NT"`` in this module's row-major terms:
    a column-major operand not transposed is a row-major one transposed, and C is column-major (``"T"``)."""
    lay = check_layout(layout)
    if len(lay) != 2:
        raise ValueError(f"layout must be a two-letter cuBLAS layout such as 'NN' or 'TN', got {layout!r}")
    flip = {"N": "T", "T": "N"}
    return flip[lay[0]] + flip[lay[1]] + "T"


def alignment_bytes(extent: int, size: int | float) -> int:
    """The largest power of two up to :data:`ALIGNED_BYTES` dividing ``extent·size`` bytes (0 when that
    is not a whole number of bytes: a row of an odd number of 4-bit elements)."""
    nbytes, w = extent * size, ALIGNED_BYTES
    if nbytes != int(nbytes):
        return 0
    nbytes = int(nbytes)
    while nbytes % w:
        w //= 2
    return w


def narrowest_alignment(M: int, N: int, K: int, dtype: Any, layout: str = "NN") -> int:
    """Bytes to which the worst-aligned leading dimension of A, B and C is aligned (16: all aligned).

    A and B hold ``dtype`` elements, C the output's (:func:`perfkit.dtypes.output_itemsize`). An
    operand with an extent of 1 is skipped (a vector has no stride). ``layout=""``: every one of M, N
    and K counts, at the input's element size.
    """
    dims = {"M": M, "N": N, "K": K}
    lead = leading_dims(layout)
    if lead is None:
        extents = [d for d in (M, N, K) if d > 1]
        return min((alignment_bytes(d, itemsize(dtype)) for d in extents), default=ALIGNED_BYTES)
    shapes = (("M", "K"), ("K", "N"), ("M", "N"))
    sizes = (itemsize(dtype), itemsize(dtype), output_itemsize(dtype))
    worst = ALIGNED_BYTES
    for ld, shape, size in zip(lead, shapes, sizes):
        if min(dims[d] for d in shape) > 1:
            worst = min(worst, alignment_bytes(dims[ld], size))
    return worst


def alignment_class(nbytes: int) -> str:
    """``"aligned"`` (16 bytes), ``"partial"`` (4 to 8: narrow ``cp.async`` copies) or ``"narrow"``
    (under 4 bytes: no asynchronous copy) for a leading dimension aligned to ``nbytes`` bytes."""
    return "aligned" if nbytes >= ALIGNED_BYTES else "partial" if nbytes >= ASYNC_COPY_BYTES else "narrow"

