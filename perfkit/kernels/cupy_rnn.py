"""A persistent vanilla-RNN forward kernel (CuPy, one cooperative launch for the whole sequence).

:func:`persistent_rnn` computes ``h_t = act(x_proj[t] + h_{t-1} @ U.T)`` for every step in ONE
kernel launch, after Baidu's "Persistent RNNs" (Diamos et al., ICML 2016). A GEMM-per-step loop
reads all of U (H² fp16 values) from memory at every step and pays a launch per step; at a small
minibatch each step is a thin GEMM whose time is mostly that reload and that launch. Here U is
read once and kept on chip for the whole sequence.

Design. One block per SM, launched cooperatively (``cuLaunchCooperativeKernel``; the occupancy
API confirms that every block is resident at once). Block j owns ``rows_per_block`` consecutive
rows of U and copies them ONCE into dynamic shared memory (opting in above 48 KiB). Each step,
every block stages ``h_{t-1}`` (B×H fp16, read through L2 with ``__ldcg``, since other SMs wrote
it) into shared memory, in chunks of ``batch_chunk`` rows when it does not fit beside the
weights; each warp computes a 2-row × ``batch_tile``-batch tile of dot products, its 32 lanes
splitting the H-long sums in 16-byte vectors, with fp32 accumulation and a shuffle reduction;
one lane per output adds ``x_proj[t]``, applies tanh or ReLU and stores ``h_t`` in fp16. A
grid-wide barrier (``cooperative_groups::this_grid().sync()``) then separates step t from t+1.

Limits. (1) The weights must fit on chip: hidden² · 2 bytes ≤ SMs × shared memory per block,
and each block also needs room for one staged row of h, so :func:`max_persistent_hidden` is
about sqrt(SMs × smem / 2): 3824 on an H100 (132 SMs × 227 KiB), 1120 on a T4 (40 × 64 KiB);
Baidu kept the weights in registers: 1152 on a TitanX (fp32), 2720 on a GP100 (fp16).
(2) All blocks must be co-resident, or the barrier would wait forever: the grid is at most one
block per SM and the launch is refused when the occupancy API reports fewer. (3) hidden must be
a multiple of N = 8: rows of U and h move as 16-byte vectors of 8 fp16 values (Baidu's kernel
needs a multiple of 4). All is checked before any launch; cupy is imported only to launch.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validate import int_in_range, one_of, positive_int
from .cupy_spin import _cupy as _spin_cupy

ACTIVATIONS = ("tanh", "relu")
VECTOR_WIDTH = 8  # fp16 values per 16-byte vector load: hidden must be a multiple of this
ROW_TILE = 2  # rows of U per warp tile (PK_ROWS_TILE in the source)
MAX_BATCH_TILE = 8  # batch columns per warp tile at most (PK_BATCH_TILE)
_KERNEL_NAME = "perfkit_persistent_rnn"

_SOURCE = r"""
#include <cooperative_groups.h>
#include <cuda_fp16.h>

#ifndef PK_ROWS_TILE
#define PK_ROWS_TILE 2
#endif
#ifndef PK_BATCH_TILE
#define PK_BATCH_TILE 8
#endif
#ifndef PK_THREADS
#define PK_THREADS 256
#endif

// Eight fp16 values (one 16-byte vector) as eight floats.
__device__ __forceinline__ void pk_unpack8(const uint4 v, float f[8])
{
    const __half2* p = reinterpret_cast<const __half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 q = __half22float2(p[i]);
        f[2 * i] = q.x;
        f[2 * i + 1] = q.y;
    }
}

// h_t = act(x_proj[t] + h_{t-1} U^T), t = 0..T-1, in one cooperative launch of one block per SM.
// Shared memory: this block's rows of U (rows_per_block x H), then a staging area for
// batch_chunk rows of h_{t-1} (batch_chunk x H), both fp16. H is a multiple of 8.
extern "C" __global__ void __launch_bounds__(PK_THREADS, 1)
perfkit_persistent_rnn(const __half* __restrict__ x_proj, const __half* __restrict__ weight,
                       const __half* h0, __half* out, int T, int B, int H,
                       int rows_per_block, int batch_chunk, int relu)
{
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    extern __shared__ __align__(16) unsigned char pk_smem[];
    uint4* w_s = reinterpret_cast<uint4*>(pk_smem);
    const int nvec = H >> 3;  // 16-byte vectors per row
    uint4* h_s = w_s + (size_t)rows_per_block * nvec;
    const int row0 = blockIdx.x * rows_per_block;
    const int nr = max(0, min(rows_per_block, H - row0));  // rows this block owns
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;

    // The block's rows of U, loaded once for the whole sequence.
    const uint4* w_g = reinterpret_cast<const uint4*>(weight) + (size_t)row0 * nvec;
    for (int i = tid; i < nr * nvec; i += blockDim.x) w_s[i] = w_g[i];

    const int row_groups = (nr + PK_ROWS_TILE - 1) / PK_ROWS_TILE;
    for (int t = 0; t < T; ++t) {
        const __half* h_prev = (t == 0) ? h0 : out + (size_t)(t - 1) * B * H;
        const __half* x_t = x_proj + (size_t)t * B * H;
        __half* h_t = out + (size_t)t * B * H;
        for (int c0 = 0; c0 < B; c0 += batch_chunk) {
            const int nb = min(batch_chunk, B - c0);
            // Stage h_{t-1}[c0 : c0 + nb] through L2 (__ldcg: never a stale L1 line).
            if (h_prev != nullptr) {
                const uint4* h_g = reinterpret_cast<const uint4*>(h_prev) + (size_t)c0 * nvec;
                for (int i = tid; i < nb * nvec; i += blockDim.x) h_s[i] = __ldcg(h_g + i);
            } else {
                for (int i = tid; i < nb * nvec; i += blockDim.x) h_s[i] = make_uint4(0u, 0u, 0u, 0u);
            }
            __syncthreads();
            const int batch_tiles = (nb + PK_BATCH_TILE - 1) / PK_BATCH_TILE;
            for (int item = warp; item < row_groups * batch_tiles; item += nwarps) {
                const int lr0 = (item % row_groups) * PK_ROWS_TILE;  // first local row
                const int lb0 = (item / row_groups) * PK_BATCH_TILE;  // first row of the chunk
                const uint4* w_row[PK_ROWS_TILE];
                const uint4* h_row[PK_BATCH_TILE];
                float acc[PK_ROWS_TILE][PK_BATCH_TILE];
#pragma unroll
                for (int r = 0; r < PK_ROWS_TILE; ++r) {
                    w_row[r] = w_s + (size_t)min(lr0 + r, nr - 1) * nvec;  // tails: clamp
#pragma unroll
                    for (int b = 0; b < PK_BATCH_TILE; ++b) acc[r][b] = 0.0f;
                }
#pragma unroll
                for (int b = 0; b < PK_BATCH_TILE; ++b) h_row[b] = h_s + (size_t)min(lb0 + b, nb - 1) * nvec;
                for (int v = lane; v < nvec; v += 32) {
                    float w[PK_ROWS_TILE][8];
#pragma unroll
                    for (int r = 0; r < PK_ROWS_TILE; ++r) pk_unpack8(w_row[r][v], w[r]);
#pragma unroll
                    for (int b = 0; b < PK_BATCH_TILE; ++b) {
                        float h[8];
                        pk_unpack8(h_row[b][v], h);
#pragma unroll
                        for (int r = 0; r < PK_ROWS_TILE; ++r) {
#pragma unroll
                            for (int k = 0; k < 8; ++k) acc[r][b] = fmaf(w[r][k], h[k], acc[r][b]);
                        }
                    }
                }
#pragma unroll
                for (int r = 0; r < PK_ROWS_TILE; ++r) {
#pragma unroll
                    for (int b = 0; b < PK_BATCH_TILE; ++b) {
                        float s = acc[r][b];
#pragma unroll
                        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
                        if (lane == r * PK_BATCH_TILE + b && lr0 + r < nr && lb0 + b < nb) {
                            const size_t idx = (size_t)(c0 + lb0 + b) * H + row0 + lr0 + r;
                            const float y = s + __half2float(x_t[idx]);
                            h_t[idx] = __float2half_rn(relu ? fmaxf(y, 0.0f) : tanhf(y));
                        }
                    }
                }
            }
            __syncthreads();  // the next chunk overwrites h_s
        }
        if (t + 1 < T) grid.sync();  // h_t is complete everywhere before step t+1 reads it
    }
}
"""


def _options(batch_tile: int, threads: int) -> tuple[str, ...]:
    """Compiler options for one variant of :data:`_SOURCE` (scripts/check_cuda_source.py uses them).

    C++17 because CUDA 13's headers (libcu++) refuse C++14, CuPy's default."""
    return ("--std=c++17", f"-DPK_ROWS_TILE={ROW_TILE}", f"-DPK_BATCH_TILE={batch_tile}",
            f"-DPK_THREADS={threads}")


@dataclass(frozen=True)
class PersistentPlan:
    """How :func:`persistent_rnn` runs for one (hidden, batch) on a device; sizes in bytes."""

    hidden: int
    batch: int
    sms: int  # streaming multiprocessors: at most one block each
    smem_per_block_bytes: int  # the device's (opt-in) shared-memory limit per block
    threads: int  # per block
    blocks: int  # grid size, ≤ sms, all co-resident
    rows_per_block: int  # rows of U each block keeps on chip, ceil(hidden / sms)
    batch_chunk: int  # rows of h_{t-1} staged in shared memory at once (≤ batch)
    batch_tile: int  # batch columns in one warp's tile (1, 2, 4 or 8)
    row_tile: int  # rows of U in one warp's tile
    weight_bytes: int  # the whole fp16 U, hidden² · 2
    block_weight_bytes: int  # rows_per_block · hidden · 2
    staging_bytes: int  # batch_chunk · hidden · 2
    smem_bytes: int  # dynamic shared memory per block: block_weight_bytes + staging_bytes
    flops_per_step: int  # 2 · hidden² · batch (the recurrent product)


def _block_need(hidden: int, sms: int) -> tuple[int, int]:
    """(rows per block, bytes for those rows of U plus one staged row of h)."""
    rows = -(-hidden // sms)
    return rows, (rows + 1) * hidden * 2


def _largest_hidden(sms: int, smem: int) -> int:
    """Largest multiple of VECTOR_WIDTH whose weights and one staged h row fit; 0 if none."""
    h = math.isqrt(sms * smem // 2) // VECTOR_WIDTH * VECTOR_WIDTH
    while h > 0 and _block_need(h, sms)[1] > smem:
        h -= VECTOR_WIDTH
    return h


def persistent_rnn_plan(hidden: int, batch: int, *, sms: int, smem_per_block_bytes: int,
                        threads: int = 256) -> PersistentPlan:
    """The launch plan for ``hidden`` × ``batch`` on a device with ``sms`` SMs (pure; CPU only).

    Raises ``ValueError`` naming the limit that is exceeded: hidden not a multiple of 8 (the
    16-byte fp16 vectors); the fp16 recurrent weights (hidden² · 2 bytes) larger than all the
    shared memory of one block per SM; one block's rows of U plus one staged row of h larger
    than ``smem_per_block_bytes``. The grid is ceil(hidden / rows_per_block) ≤ ``sms`` blocks;
    :func:`persistent_rnn` also checks it against the occupancy API before launching.
    """
    hidden, batch = positive_int("hidden", hidden), positive_int("batch", batch)
    sms = positive_int("sms", sms)
    smem = positive_int("smem_per_block_bytes", smem_per_block_bytes)
    threads = int_in_range("threads", threads, 32, 1024)
    if threads % 32:
        raise ValueError(f"threads must be a multiple of 32 (whole warps) in 32…1024, got {threads}")
    if hidden % VECTOR_WIDTH:
        up = -(-hidden // VECTOR_WIDTH) * VECTOR_WIDTH
        raise ValueError(f"hidden must be a multiple of {VECTOR_WIDTH} (the kernel moves fp16 values in "
                         f"16-byte vectors of {VECTOR_WIDTH}), got {hidden}; pad it to {up}")
    largest = _largest_hidden(sms, smem)
    weight_bytes = hidden * hidden * 2
    if weight_bytes > sms * smem:
        raise ValueError(f"the fp16 recurrent weights do not fit on chip: hidden² · 2 = {weight_bytes:,} bytes "
                         f"> sms × smem_per_block_bytes = {sms} × {smem:,} = {sms * smem:,} bytes (one block "
                         f"per SM); the largest hidden that fits here is {largest}")
    rows, need = _block_need(hidden, sms)
    if need > smem:
        raise ValueError(f"one block's share does not fit in smem_per_block_bytes = {smem:,}: rows_per_block = "
                         f"ceil({hidden} / {sms}) = {rows} rows of U ({rows * hidden * 2:,} bytes) plus one "
                         f"staged row of h ({hidden * 2:,} bytes) = {need:,} bytes; the largest hidden that "
                         f"fits here is {largest}")
    blocks = -(-hidden // rows)
    assert blocks <= sms, "rows_per_block = ceil(hidden / sms) keeps the grid at one block per SM"
    chunk = min(batch, (smem - rows * hidden * 2) // (hidden * 2))
    tile = min(MAX_BATCH_TILE, 1 << (chunk - 1).bit_length())
    return PersistentPlan(hidden=hidden, batch=batch, sms=sms, smem_per_block_bytes=smem, threads=threads,
                          blocks=blocks, rows_per_block=rows, batch_chunk=chunk, batch_tile=tile,
                          row_tile=ROW_TILE, weight_bytes=weight_bytes,
                          block_weight_bytes=rows * hidden * 2, staging_bytes=chunk * hidden * 2,
                          smem_bytes=(rows + chunk) * hidden * 2, flops_per_step=2 * hidden * hidden * batch)


def max_persistent_hidden(*, sms: int, smem_per_block_bytes: int, batch: int = 1) -> int:
    """Largest hidden size :func:`persistent_rnn_plan` accepts on such a device (0 if none).

    About sqrt(sms · smem_per_block_bytes / 2): 3824 on an H100 (132 SMs × 227 KiB), 1120 on a
    T4 (40 × 64 KiB). ``batch`` does not change it: h is staged in chunks of at least one row.
    Baidu's table for comparison: 1152 (TitanX, fp32 in registers), 2720 (GP100, fp16).
    """
    sms = positive_int("sms", sms)
    smem = positive_int("smem_per_block_bytes", smem_per_block_bytes)
    positive_int("batch", batch)
    return _largest_hidden(sms, smem)


# ------------------------------------------------------------------------------------ tensors

def _check_tensors(x_proj: Any, weight: Any, h0: Any, *, fp16: bool) -> tuple[int, int, int]:
    """(T, B, H) after checking types, shapes, dtypes and devices; errors name the argument."""
    import torch

    for name, t in (("x_proj", x_proj), ("weight", weight), ("h0", h0)):
        if not (t is None and name == "h0") and not isinstance(t, torch.Tensor):
            shape = {"x_proj": "(T, B, H)", "weight": "(H, H)", "h0": "(B, H) or None"}[name]
            raise TypeError(f"{name} must be a torch.Tensor of shape {shape}, got {type(t).__name__}")
    if x_proj.dim() != 3 or min(x_proj.shape) < 1:
        raise ValueError(f"x_proj must be a (T, B, H) tensor with T, B, H ≥ 1, got shape {tuple(x_proj.shape)}")
    T, B, H = x_proj.shape
    if tuple(weight.shape) != (H, H):
        raise ValueError(f"weight must be (H, H) = ({H}, {H}) to match x_proj's H, got {tuple(weight.shape)}")
    if h0 is not None and tuple(h0.shape) != (B, H):
        raise ValueError(f"h0 must be (B, H) = ({B}, {H}) to match x_proj, got {tuple(h0.shape)}")
    for name, t in (("x_proj", x_proj), ("weight", weight), ("h0", h0)):
        if t is not None and fp16 and t.dtype != torch.float16:
            raise ValueError(f"{name} must be float16 (the kernel stores fp16, accumulates in fp32), got {t.dtype}; "
                             "convert it with .half()")
        if t is not None and not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got {t.dtype}")
        if t is not None and t.device != x_proj.device:
            raise ValueError(f"{name} is on {t.device} but x_proj is on {x_proj.device}; put all on one device")
    return int(T), int(B), int(H)


def rnn_reference(x_proj, weight, h0=None, *, activation: str = "tanh"):
    """The kernel's math step by step in torch, on any device (the CPU too): the test oracle.

    ``h_t = act(x_proj[t] + h_{t-1} @ weight.T)`` with fp32 accumulation, ``h_t`` rounded to
    ``x_proj``'s dtype after each step (as the kernel stores fp16). Returns (T, B, H) in that dtype.
    """
    import torch

    T, B, H = _check_tensors(x_proj, weight, h0, fp16=False)
    act = torch.relu if one_of("activation", activation, ACTIVATIONS) == "relu" else torch.tanh
    w = weight.detach().float()
    h = torch.zeros(B, H, device=x_proj.device) if h0 is None else h0.detach().float()
    out = torch.empty(T, B, H, dtype=x_proj.dtype, device=x_proj.device)
    for t in range(T):
        out[t] = act(x_proj[t].detach().float() + h @ w.T).to(x_proj.dtype)
        h = out[t].float()
    return out


# ------------------------------------------------------------------------------------ launching

def _cupy():
    """cupy, or a RuntimeError saying that the persistent RNN kernel needs CuPy and a GPU."""
    try:
        return _spin_cupy()
    except RuntimeError as e:
        raise RuntimeError(str(e).replace("the spin kernel", "the persistent RNN kernel", 1)) from None


@functools.lru_cache(maxsize=None)
def _kernel(device_id: int, batch_tile: int, threads: int):
    """The compiled RawKernel for one variant on one device (compiled on first use)."""
    return _cupy().RawKernel(_SOURCE, _KERNEL_NAME, options=_options(batch_tile, threads),
                             enable_cooperative_groups=True)


@functools.lru_cache(maxsize=None)
def _device_limits(device_id: int) -> tuple[int, int, bool]:
    """(SMs, opt-in shared memory per block in bytes, cooperative launch supported) of a device."""
    props = _cupy().cuda.runtime.getDeviceProperties(device_id)
    smem = int(props.get("sharedMemPerBlockOptin") or props["sharedMemPerBlock"])
    return int(props["multiProcessorCount"]), smem, bool(props.get("cooperativeLaunch", 1))


@functools.lru_cache(maxsize=256)
def _prepare(device_id: int, hidden: int, batch: int, threads: int = 256):
    """(kernel, plan) for this GPU, or ValueError naming the limit; launches nothing (cached)."""
    cupy = _cupy()
    sms, optin, cooperative = _device_limits(device_id)
    if not cooperative:
        raise ValueError(f"GPU {device_id} does not support cooperative launch (cudaDevAttrCooperativeLaunch "
                         "= 0), which the grid-wide barrier between time steps needs")
    plan = persistent_rnn_plan(hidden, batch, sms=sms, smem_per_block_bytes=optin, threads=threads)
    kernel = _kernel(device_id, plan.batch_tile, plan.threads)  # compiled on first use
    if kernel.max_dynamic_shared_size_bytes < plan.smem_bytes:  # opt in (all its smem is dynamic)
        kernel.max_dynamic_shared_size_bytes = plan.smem_bytes
    per_sm = int(cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
        kernel.kernel.ptr, plan.threads, plan.smem_bytes))
    if plan.blocks > per_sm * sms:
        raise ValueError(f"co-residency: the grid needs {plan.blocks} blocks resident at once, but the occupancy "
                         f"API allows {per_sm} block(s) per SM × {sms} SMs = {per_sm * sms} for {plan.threads} "
                         f"threads and {plan.smem_bytes:,} bytes of shared memory per block")
    return kernel, plan


def _aligned(t):
    """``t`` contiguous with a 16-byte-aligned data pointer (copied only when needed)."""
    t = t.detach().contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()


def persistent_rnn(x_proj, weight, h0=None, *, activation: str = "tanh"):
    """``h_t = act(x_proj[t] + h_{t-1} @ weight.T)`` for t = 0…T−1 in ONE kernel launch.

    Args:
        x_proj: (T, B, H) float16 CUDA tensor, the input GEMM ``x_t @ W_ih.T + b_ih + b_hh``
            done beforehand for all t.
        weight: (H, H) float16, the recurrent weight U (``nn.RNN``'s ``weight_hh_l0``).
        h0: (B, H) float16 initial state, or None for zeros.
        activation: ``"tanh"`` or ``"relu"`` (DeepBench's vanilla RNN uses ReLU).

    Returns the (T, B, H) float16 hidden states (fp32 accumulation). The kernel is launched on
    torch's current CUDA stream, so CUDA events recorded there (perfkit.bench) time it. Every
    check — arguments (TypeError/ValueError naming the argument), CuPy and a GPU
    (RuntimeError), the plan against this GPU's SMs, opt-in shared memory, cooperative launch
    and occupancy (ValueError naming the limit) — happens before anything is launched.
    """
    T, B, H = _check_tensors(x_proj, weight, h0, fp16=True)
    relu = one_of("activation", activation, ACTIVATIONS) == "relu"
    cupy = _cupy()
    import torch

    if x_proj.device.type != "cuda":  # all tensors share x_proj's device (checked above)
        raise ValueError(f"x_proj, weight and h0 must be CUDA tensors, got them on {x_proj.device}")
    device_id = x_proj.device.index if x_proj.device.index is not None else torch.cuda.current_device()
    with cupy.cuda.Device(device_id):
        kernel, plan = _prepare(device_id, H, B)
        x, w = _aligned(x_proj), _aligned(weight)
        h = _aligned(h0) if h0 is not None else None
        out = torch.empty((T, B, H), dtype=torch.float16, device=x_proj.device)
        args = (np.uint64(x.data_ptr()), np.uint64(w.data_ptr()), np.uint64(h.data_ptr() if h is not None else 0),
                np.uint64(out.data_ptr()), np.int32(T), np.int32(B), np.int32(H),
                np.int32(plan.rows_per_block), np.int32(plan.batch_chunk), np.int32(relu))
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream(x_proj.device).cuda_stream, device_id)
        with stream:
            kernel((plan.blocks,), (plan.threads,), args, shared_mem=plan.smem_bytes)
    return out


__all__ = ["ACTIVATIONS", "PersistentPlan", "max_persistent_hidden", "persistent_rnn",
           "persistent_rnn_plan", "rnn_reference"]
