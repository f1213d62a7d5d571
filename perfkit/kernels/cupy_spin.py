"""A CuPy kernel for waves and tails: :func:`spin_launcher` and :func:`spin_blocks_per_sm`.

:func:`spin_launcher` launches B blocks that each busy-wait a fixed number of SM clock cycles, so a
launch lasts ``cdiv(B, SMs × blocks per SM)`` × (spin time): the wave/tail effect with nothing else
in the way. :func:`spin_blocks_per_sm` says how many of its blocks fit on one SM. cupy is imported
only when one of them runs.

The spin kernel and blocks per SM
---------------------------------
A wave is "SMs × resident blocks per SM". perfkit fixes the second factor at one: every spin block
requests just over half of an SM's shared memory as dynamic shared memory (opting in above 48 KiB
through the RawKernel's ``max_dynamic_shared_size_bytes`` attribute), so two blocks can never share
an SM. The driver's occupancy calculator (``cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor``)
then confirms the number; :func:`spin_blocks_per_sm` returns what it reports.

Not on ROCm
-----------
CuPy has a ROCm build, but perfkit's CuPy kernels (this one and :mod:`.cupy_rnn`'s) are not run on
an AMD GPU (:data:`ROCM_NOTE`, checked before cupy is imported): they were written and checked for
NVIDIA GPUs only. This one forces one block per SM with CUDA's dynamic shared-memory opt-in above
48 KiB, reads ``cudaDeviceProp`` fields by name and asks CUDA's occupancy calculator; the persistent
RNN kernel assumes 32-lane warps (lane = tid & 31, 32-lane shuffles; an AMD wavefront has 64 lanes)
and includes ``cuda_fp16.h``. Timings from an unchecked port would not be trusted, so none is made.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from .._validate import int_in_range, positive_int
from ..device_runtime import cuda_available, gpu_runtime

_SPIN_SOURCE = r"""
extern "C" __global__ void perfkit_spin(long long cycles)
{
    // Thread 0 busy-waits `cycles` SM clock cycles (clock64() is a volatile read, so the loop is
    // never optimized away); the other threads wait at the barrier. Dynamic shared memory is
    // requested at launch only to limit how many blocks share an SM; the kernel does not use it.
    if (threadIdx.x == 0) {
        long long start = clock64();
        while (clock64() - start < cycles) { }
    }
    __syncthreads();
}
"""

_NEEDS_GPU = ("the spin kernel needs CuPy and an NVIDIA GPU (pip install cupy-cuda12x or cupy-cuda13x, "
              "matching your CUDA); on a CPU, show the recorded data instead")

#: Why perfkit's CuPy kernels are not run on ROCm (the module notes say more).
ROCM_NOTE = ("perfkit's CuPy kernels are CUDA C++ written and checked for NVIDIA GPUs only (the spin kernel "
             "relies on CUDA's shared-memory opt-in and occupancy calculator, the persistent RNN kernel on "
             "32-lane warps, where an AMD wavefront has 64 lanes), so they are not run on ROCm; "
             "show the recorded data instead")


def rocm_note() -> str | None:
    """:data:`ROCM_NOTE` when the GPU in use runs ROCm (an AMD GPU), else ``None``."""
    return ROCM_NOTE if gpu_runtime() == "rocm" else None


def _cupy():
    """Import cupy and check that a CUDA device is usable, else raise a short RuntimeError
    (on ROCm, before importing cupy: :data:`ROCM_NOTE`)."""
    if rocm_note():
        raise RuntimeError(f"the spin kernel is not run on this AMD GPU: {ROCM_NOTE}")
    try:
        import cupy
    except Exception as e:  # ImportError, or a CUDA library missing at import time
        raise RuntimeError(f"{_NEEDS_GPU}; importing cupy failed: {e}") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        raise RuntimeError(f"{_NEEDS_GPU}; CuPy sees no usable GPU: {e}") from None
    if count < 1:
        raise RuntimeError(f"{_NEEDS_GPU}; CuPy sees no GPU")
    return cupy


@functools.lru_cache(maxsize=None)
def _spin_kernel(device_id: int):
    cupy = _cupy()
    return cupy.RawKernel(_SPIN_SOURCE, "perfkit_spin")


@functools.lru_cache(maxsize=None)
def _spin_config(device_id: int, threads: int, one_block_per_sm: bool) -> tuple[int, int]:
    """(dynamic shared bytes per block, co-resident blocks per SM) for the spin kernel on a device."""
    cupy = _cupy()
    props = cupy.cuda.runtime.getDeviceProperties(device_id)  # cudaDeviceProp fields, by name
    kernel = _spin_kernel(device_id)
    max_threads = int(props["maxThreadsPerBlock"])
    if threads > max_threads:
        raise ValueError(f"threads must be at most {max_threads} (this GPU's limit per block), got {threads}")
    smem = 0
    if one_block_per_sm:
        per_sm = int(props["sharedMemPerMultiprocessor"])
        per_block = int(props.get("sharedMemPerBlockOptin") or props["sharedMemPerBlock"])
        smem = per_sm // 2 + 1024  # more than half an SM's shared memory: two blocks never fit
        if smem > per_block:
            raise RuntimeError(f"cannot force one block per SM: that needs {smem} bytes of shared memory per "
                               f"block and this GPU allows {per_block}; use one_block_per_sm=False")
        if smem > 48 * 1024:  # above 48 KiB of dynamic shared memory a kernel must opt in
            kernel.max_dynamic_shared_size_bytes = smem
    bps = None
    occupancy = getattr(cupy.cuda.driver, "occupancyMaxActiveBlocksPerMultiprocessor", None)
    if occupancy is not None:
        try:
            bps = int(occupancy(kernel.kernel.ptr, threads, smem))
        except Exception:  # an old CuPy or driver: fall back to the shared-memory argument
            bps = None
    if bps is None:
        if not one_block_per_sm:
            raise RuntimeError("this CuPy has no occupancy calculator (cupy.cuda.driver."
                               "occupancyMaxActiveBlocksPerMultiprocessor); use one_block_per_sm=True")
        bps = 1
    if bps < 1:
        raise RuntimeError(f"the spin kernel with {threads} threads and {smem} bytes of shared memory "
                           "cannot be resident on this GPU (occupancy 0)")
    return smem, bps


def spin_blocks_per_sm(threads: int = 128, *, one_block_per_sm: bool = True) -> int:
    """How many blocks of the spin kernel are resident on one SM at once.

    With ``one_block_per_sm=True`` (the default) each block requests just over half of an SM's
    shared memory (dynamic shared memory, opted in through the kernel's
    ``max_dynamic_shared_size_bytes`` attribute), so exactly one block fits per SM and a wave is
    one block per SM, as in NVIDIA's tile figures. The driver's occupancy calculator
    (``cuOccupancyMaxActiveBlocksPerMultiprocessor``, through ``cupy.cuda.driver``) reports the
    number when CuPy exposes it (it must then say 1); otherwise 1 is returned by construction. With
    ``one_block_per_sm=False`` no shared memory is requested and the occupancy calculator alone
    gives the number (typically the hardware limit on resident blocks, e.g. 32 on Hopper).

    Raises ``RuntimeError`` without CuPy or an NVIDIA GPU (on ROCm, saying why: :data:`ROCM_NOTE`).
    """
    threads = int_in_range("threads", threads, 1, 1024)
    cupy = _cupy()
    return _spin_config(cupy.cuda.runtime.getDevice(), threads, bool(one_block_per_sm))[1]


def spin_launcher(blocks: int, *, threads: int = 128, spin_cycles: int = 20_000,
                  one_block_per_sm: bool = True) -> Callable[[], None]:
    """A zero-argument function that launches ``blocks`` blocks that each spin ``spin_cycles`` clocks.

    One thread per block busy-waits on ``clock64()`` (the others wait at a barrier), so a block
    lasts ``spin_cycles`` SM cycles (≈ 10 µs for 20 000 cycles at 2 GHz) and a launch lasts about
    ``ceil(blocks / (SMs · spin_blocks_per_sm()))`` block-times. Pass the result to
    :func:`perfkit.bench`, with ``flush_l2=False`` (the kernel touches no memory).

    The kernel is compiled, configured and launched once here, outside any timing. Each launch
    goes to torch's current CUDA stream when torch is installed and sees the GPU (else to CuPy's
    current stream). By default both are the legacy default stream; following torch's stream
    explicitly keeps the launch on the stream :func:`perfkit.bench` records its events on, also
    when bench captures a CUDA graph on a side stream.

    Raises ``RuntimeError`` without CuPy or an NVIDIA GPU (on ROCm, saying why: :data:`ROCM_NOTE`).
    """
    blocks = int_in_range("blocks", blocks, 1, 2**31 - 1)
    threads = int_in_range("threads", threads, 1, 1024)
    spin_cycles = positive_int("spin_cycles", spin_cycles)
    cupy = _cupy()
    device_id = cupy.cuda.runtime.getDevice()
    kernel = _spin_kernel(device_id)
    smem, _ = _spin_config(device_id, threads, bool(one_block_per_sm))
    grid, block, args = (blocks,), (threads,), (np.int64(spin_cycles),)
    try:
        import torch
    except ImportError:
        torch = None
    follow_torch = torch is not None and cuda_available()
    streams: dict[int, object] = {}  # torch stream pointer -> cupy.cuda.ExternalStream

    def launch() -> None:
        if follow_torch:
            ptr = torch.cuda.current_stream().cuda_stream
            stream = streams.get(ptr)
            if stream is None:
                stream = streams[ptr] = cupy.cuda.ExternalStream(ptr)
            with stream:
                kernel(grid, block, args, shared_mem=smem)
        else:
            kernel(grid, block, args, shared_mem=smem)

    launch()  # compile and load now, outside any timing; also checks the configuration
    cupy.cuda.runtime.deviceSynchronize()
    return launch


__all__ = ["ROCM_NOTE", "rocm_note", "spin_blocks_per_sm", "spin_launcher"]
