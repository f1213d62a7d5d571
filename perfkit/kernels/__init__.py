"""Kernels whose shape *you* choose, one module per backend.

- :mod:`~perfkit.kernels.triton_gemm`: :func:`tiled_matmul`, a GEMM with a forced output tile.
- :mod:`~perfkit.kernels.cupy_spin`: :func:`spin_launcher`, blocks that spin a fixed time (waves).

Neither triton nor cupy is imported until a kernel runs.
"""

from __future__ import annotations

from .cupy_spin import spin_blocks_per_sm, spin_launcher
from .triton_gemm import tiled_matmul, triton_mode

__all__ = ["spin_blocks_per_sm", "spin_launcher", "tiled_matmul", "triton_mode"]
