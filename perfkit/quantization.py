"""Dimension quantization: alignment, tile quantization and wave quantization.

From NVIDIA's *Matrix Multiplication Background* guide: a GEMM's M×N output is split into tiles of
TM×TN, one thread block each (``tile=(TM, TN)``: TM rows of M, TN columns of N).

- *Tile quantization*: when M or N is not a multiple of the tile, the edge tiles do partly useless
  work (257×256 on 128×128 tiles launches 6 tiles for 4.02 tiles of work).
- *Wave quantization*: tiles run in waves of ``SMs × blocks per SM``; a last, partial wave costs
  as much as a full one (on a 108-SM A100 117 tiles take 2 waves, 54 % utilised).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ._validate import non_negative_int, positive_int, tile_pair
from .dtypes import itemsize

__all__ = [
    "TileQuantization",
    "cdiv",
    "WaveQuantization",
    "alignment",
    "is_aligned",
    "pad_to_multiple",
    "tile_quantization",
    "wave_quantization",
]


def cdiv(a, b):
    """Ceiling division ``⌈a / b⌉`` of non-negative integers (NumPy integer arrays work too).

    Exact for any size, unlike ``math.ceil(a / b)``, which goes through a float.
    """
    return -(-a // b)


def alignment(dtype: Any, bytes: int = 16) -> int:
    """Elements per ``bytes`` bytes (default 16): the dimension multiple Tensor Cores like best. For a sub-byte
    dtype, the fewest elements that fill a whole multiple of ``bytes`` (float6: 64 elements in 48 bytes).

    float16/bfloat16 → 8, float32/tf32 → 4, float64 → 2, int8/float8 → 16, float4 → 32. NVIDIA recommends
    ``bytes=128`` on A100 (64 float16 elements).
    """
    nbytes = positive_int("bytes", bytes)
    size = itemsize(dtype)
    if isinstance(size, float):  # a sub-byte element (float6, float4): the fewest elements filling whole multiples
        return (Fraction(nbytes) / Fraction(size)).numerator
    if nbytes % size:
        raise ValueError(f"bytes must be a multiple of the element size ({size} bytes), got {nbytes}")
    return nbytes // size


def is_aligned(dtype: Any, *dims: int, bytes: int = 16) -> bool:
    """Whether every dimension in ``dims`` is a multiple of :func:`alignment` of ``dtype``."""
    a = alignment(dtype, bytes)
    return all(positive_int(f"dims[{i}]", d) % a == 0 for i, d in enumerate(dims))


def pad_to_multiple(n: int, multiple: int) -> int:
    """The smallest multiple of ``multiple`` that is ≥ ``n`` (e.g. a vocabulary padded to 8)."""
    n, multiple = non_negative_int("n", n), positive_int("multiple", multiple)
    return cdiv(n, multiple) * multiple


@dataclass(frozen=True)
class TileQuantization:
    """Tiles launched for an M×N output and the fraction of their work that is useful."""

    M: int
    N: int
    tile: tuple[int, int]
    tiles_m: int  # tiles along M: ceil(M / TM)
    tiles_n: int  # tiles along N: ceil(N / TN)
    tiles: int
    efficiency: float  # M·N / (tiles·TM·TN), in (0, 1]


def tile_quantization(M: int, N: int, tile: tuple[int, int]) -> TileQuantization:
    """Tile quantization of an M×N GEMM output on ``tile=(TM, TN)`` tiles."""
    M, N = positive_int("M", M), positive_int("N", N)
    tm, tn = tile_pair("tile", tile)
    tiles_m, tiles_n = cdiv(M, tm), cdiv(N, tn)
    tiles = tiles_m * tiles_n
    return TileQuantization(M, N, (tm, tn), tiles_m, tiles_n, tiles, M * N / (tiles * tm * tn))


@dataclass(frozen=True)
class WaveQuantization:
    """How an M×N GEMM's tiles fill the GPU: waves of ``sms·blocks_per_sm`` tiles."""

    M: int
    N: int
    tile: tuple[int, int]
    sms: int
    blocks_per_sm: int
    tiles: int
    wave_size: int  # tiles that run at once: sms·blocks_per_sm
    waves: int  # ceil(tiles / wave_size)
    last_wave_tiles: int  # tiles in the last wave, in 1..wave_size
    utilization: float  # tiles / (waves·wave_size), in (0, 1]


def wave_quantization(M: int, N: int, tile: tuple[int, int], sms: int, blocks_per_sm: int = 1) -> WaveQuantization:
    """Wave quantization of an M×N GEMM on ``tile=(TM, TN)`` tiles over ``sms`` SMs."""
    tq = tile_quantization(M, N, tile)
    sms, blocks_per_sm = positive_int("sms", sms), positive_int("blocks_per_sm", blocks_per_sm)
    wave_size = sms * blocks_per_sm
    waves = cdiv(tq.tiles, wave_size)
    return WaveQuantization(
        M=tq.M, N=tq.N, tile=tq.tile, sms=sms, blocks_per_sm=blocks_per_sm, tiles=tq.tiles,
        wave_size=wave_size, waves=waves, last_wave_tiles=tq.tiles - (waves - 1) * wave_size,
        utilization=tq.tiles / (waves * wave_size),
    )
