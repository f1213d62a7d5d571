"""Kernels whose shape *you* choose, one module per backend.

- :mod:`~perfkit.kernels.triton_gemm`: :func:`tiled_matmul`, a GEMM with a forced output tile.
- :mod:`~perfkit.kernels.cupy_spin`: :func:`spin_launcher`, blocks that spin a fixed time (waves).
- :mod:`~perfkit.kernels.cupy_rnn`: :func:`persistent_rnn`, a vanilla RNN's whole forward
  sequence in one cooperative launch with the recurrent weights kept on chip (Baidu's persistent
  RNN), its launch plan (:func:`persistent_rnn_plan`, :func:`max_persistent_hidden`) and the
  step-by-step torch oracle :func:`rnn_reference`.

Neither triton nor cupy is imported until a kernel runs.

On ROCm (an AMD GPU through torch's ROCm build) the Triton GEMM runs: Triton compiles for AMD GPUs
and the kernel uses nothing CUDA-only (see :mod:`.triton_gemm`). The CuPy kernels do not:
:func:`~.cupy_spin.rocm_note` says why (``None`` off ROCm), and they raise that before importing cupy.
"""

from __future__ import annotations

from .cupy_rnn import PersistentPlan, max_persistent_hidden, persistent_rnn, persistent_rnn_plan, rnn_reference
from .cupy_spin import rocm_note, spin_blocks_per_sm, spin_launcher
from .triton_gemm import tiled_matmul, triton_mode

__all__ = ["PersistentPlan", "max_persistent_hidden", "persistent_rnn", "persistent_rnn_plan", "rnn_reference",
           "rocm_note", "spin_blocks_per_sm", "spin_launcher", "tiled_matmul", "triton_mode"]
