"""Fusion: a GEMM and the memory-bound ops after it, eager against ``torch.compile``.

``fusion_chains`` (the memory-limited chapter) times each chain of :data:`CHAINS` eagerly (one
kernel per op) and compiled (the tail fused), and counts the tail's bytes with the byte model
(:func:`tail_bytes`). A CPU (or ``quick``) runs small sizes in float32 on one thread, without
predictions (the models are of GPUs). Units: seconds, bytes.
"""

from __future__ import annotations

import functools
import math
import shutil
import time
from typing import Any, Callable, NamedTuple

import pandas as pd

from ..._validate import dtype_name, one_of, positive_int, sequence_of
from ...dtypes import canonical_dtype, itemsize
from ...matmul import seeded_on
from ...memory_model import chain_bytes, layer_bytes, memory_time
from ...placement import ensure_fits, lean_bench, one_cpu_thread, resolve_device
from ...shapes import conv_gemms, linear_gemms
from ...timing import Measurement
from ...experiments.measure import known_names, layer_op, measured_spec, predicted_s, seeded_randn, sweep, timing_or_nan
from ...experiments.registry import register

__all__ = ["CHAINS", "MODES", "PHASES", "compiler_missing", "fusion_chains", "fusion_savings",
           "predicted_chains", "tail_bytes"]

#: Each chain: its GEMM layer, then the memory-bound tail as ``(kind, params)`` of
#: :mod:`perfkit.memory_model`.
CHAINS: dict[str, tuple[str, tuple]] = {
    "conv_bn_relu": ("conv", (("batchnorm", {}), ("relu", {}))),
    "linear_bias_gelu_dropout": ("linear", (("bias", {"dim": -1}), ("gelu", {}), ("dropout", {}))),
}
MODES: tuple[str, ...] = ("eager", "compiled")
PHASES: tuple[str, ...] = ("forward", "forward+backward")
_DTYPES = ("float16", "bfloat16", "float32")

#: Sizes: conv (images, channels in, channels out, height), linear (tokens, features in, out).
#: A chain's GPU sizes share the tail (the same output shape).
_GPU_SIZES = {
    "conv_bn_relu": ((128, 64, 64, 56), (128, 256, 64, 56)),
    "linear_bias_gelu_dropout": ((8192, 1024, 4096), (8192, 4096, 4096)),
}
_CPU_SIZES = {
    "conv_bn_relu": ((8, 16, 16, 16),),
    "linear_bias_gelu_dropout": ((512, 128, 512),),
}
#: How many activation-sized tensors (E·s bytes) each op's eager backward moves; the rest of
#: its bytes are parameters, statistics and masks.
_BWD_MAIN = {"batchnorm": 3, "bias": 1, "dropout": 2, "relu": 3, "gelu": 3}
_NAN = float("nan")


class _Geometry(NamedTuple):
    """The shapes of a chain at one size."""

    dims: tuple[int, int, int, int]  # (batch, in, out, height); height 1 for a linear chain
    input_shape: tuple[int, ...]  # the GEMM layer's input
    gemms: dict  # the GEMM layer's GEMMs by pass (perfkit.shapes)
    tail_shape: tuple[int, ...]  # the GEMM layer's output: the tail's input and output


def _geometry(chain: str, size: Any) -> _Geometry:
    """The shapes of ``chain`` at ``size``: (batch, in, out, height) for conv, (batch, in, out)."""
    conv = CHAINS[chain][0] == "conv"
    expected = 4 if conv else 3
    if isinstance(size, (str, bytes)) or not hasattr(size, "__len__") or len(size) != expected:
        fields = "batch, in, out, height" if conv else "batch, in, out"
        raise TypeError(f"size of {chain!r} must be ({fields}), got {size!r}")
    checked = [positive_int(f"size[{k}]", v) for k, v in enumerate(size)]
    batch, c_in, c_out = checked[:3]
    if not conv:
        return _Geometry((batch, c_in, c_out, 1), (batch, c_in), linear_gemms(batch, c_in, c_out),
                         (batch, c_out))
    height = checked[3]
    gemms = conv_gemms(batch, c_in, height, height, c_out, 3, 3, padding=1)
    return _Geometry((batch, c_in, c_out, height), (batch, c_in, height, height), gemms,
                     (batch, c_out, height, height))


def tail_bytes(chain: str, size: Any, dtype: str = "float16", *, phase: str = "forward",
               fused: bool = False) -> int:
    """Bytes the tail of ``chain`` after its GEMM moves in ``phase`` by the byte model.

    Forward: :func:`~perfkit.memory_model.chain_bytes`, eager or ``fused``. The backward adds
    each op's ``layer_bytes`` (eager) or, fused, dy and the tail's input read and dx written
    once (3·E·s) plus each op's parameters, statistics and masks: a lower bound, like
    ``chain_bytes(fused=True)``.
    """
    chain = known_names("chain", chain, CHAINS)[0]
    kinds = CHAINS[chain][1]
    shape = _geometry(chain, size).tail_shape
    phase = one_of("phase", phase, PHASES)
    forward = chain_bytes(kinds, shape, dtype, fused=fused)
    if phase == "forward":
        return forward
    backward = [(kind, layer_bytes(kind, shape, dtype, pass_="backward", **params))
                for kind, params in kinds]
    if not fused:
        return forward + sum(moved for _, moved in backward)
    tensor_bytes = math.prod(shape) * itemsize(canonical_dtype(dtype))  # E·s
    extras = sum(moved - _BWD_MAIN[kind] * tensor_bytes for kind, moved in backward)
    return forward + (3 * tensor_bytes + extras)


def _chain_predicted_s(chain: str, size: Any, dtype: str, mode: str, phase: str,
                       spec: Any) -> float:
    """GEMM model of the chain's GEMMs + memory_time of its tail (eager: per op; compiled: per
    pass), seconds; NaN without ``spec``."""
    if spec is None:
        return _NAN
    geometry = _geometry(chain, size)
    if phase == "forward":
        gemm_passes = ["forward"]
        op_passes = ["forward"]
    else:
        gemm_passes = list(geometry.gemms)
        op_passes = ["forward", "backward"]
    gemm_s = sum(predicted_s(*geometry.gemms[p], dtype, spec) for p in gemm_passes)
    if mode == "eager":
        tail_s = sum(memory_time(layer_bytes(kind, geometry.tail_shape, dtype, pass_=p, **params),
                                 spec)
                     for kind, params in CHAINS[chain][1] for p in op_passes)
        return gemm_s + tail_s
    forward_bytes = tail_bytes(chain, size, dtype, fused=True)
    tail_s = memory_time(forward_bytes, spec)
    if phase != "forward":
        backward_bytes = tail_bytes(chain, size, dtype, phase=phase, fused=True) - forward_bytes
        tail_s += memory_time(backward_bytes, spec)
    return gemm_s + tail_s


def _chain_row(chain: str, size: Any, dtype: str, mode: str, phase: str, spec: Any,
               m: Measurement | None = None, compile_s: float = _NAN) -> dict[str, Any]:
    """A ``fusion_chains`` row; without ``m`` the timing columns are NaN."""
    batch, in_features, out_features, height = _geometry(chain, size).dims
    return {
        "chain": chain, "mode": mode, "phase": phase,
        "batch": batch, "in_features": in_features, "out_features": out_features, "size": height,
        "dtype": dtype,
        "bytes_eager": tail_bytes(chain, size, dtype, phase=phase, fused=False),
        "bytes_fused": tail_bytes(chain, size, dtype, phase=phase, fused=True),
        "compile_s": compile_s,
        **timing_or_nan(m),
        "predicted_s": _chain_predicted_s(chain, size, dtype, mode, phase, spec),
    }


_CHAIN_COLUMNS = {
    "chain": "'conv_bn_relu' (conv 3×3, no bias → batch norm, training → ReLU) or "
             "'linear_bias_gelu_dropout' "
             "(linear, no bias → bias add → GELU → dropout p = 0.1)",
    "mode": "'eager' (one kernel per op) or "
            "'compiled' (torch.compile, default mode, static shapes)",
    "phase": "'forward' (of training) or "
             "'forward+backward' (gradients of the input and every parameter)",
    "batch": "images (conv) or tokens (linear)",
    "in_features": "input channels or features",
    "out_features": "output channels or features",
    "size": "conv height = width, pixels (1: linear)",
    "dtype": "activations' dtype (batch norm's params float32)",
    "bytes_eager": "bytes the tail after the GEMM moves in this phase, one kernel per op "
                   "(byte model)",
    "bytes_fused": "the same tail fused, one kernel per pass: the byte model's lower bound",
    "compile_s": "seconds of the first compiled forward and backward (tracing, code generation); "
                 "NaN if eager",
    "time_s": "median duration of the phase, seconds",
    "iqr_s": "inter-quartile range of the samples, seconds",
    "predicted_s": "GEMM model + memory_time of the tail's bytes "
                   "(eager: per op; compiled: per pass), seconds; NaN on a CPU",
}


def compiler_missing(device: str = "cpu") -> str | None:
    """Why ``torch.compile`` cannot build kernels on ``device`` here, or None."""
    if device == "cpu":
        names = ("c++", "g++", "clang++")  # inductor builds C++ on a CPU
    else:
        names = ("cc", "gcc", "clang")  # Triton builds a C launcher
    if any(shutil.which(name) for name in names):
        return None
    return f"torch.compile needs {' or '.join(names)} on PATH: none found"


def _chain_fn(chain: str, size: tuple, dtype: str, device: str) -> tuple[Callable, list, Any]:
    """``(forward, inputs, dy)``: the chain as a function of its input and tensors (seeded), and
    a gradient of its output."""
    on, gen = seeded_on(device)  # on: "meta" on a pretend GPU
    geometry = _geometry(chain, size)
    gemm_kind, tail = CHAINS[chain]
    gemm_params = {"out": geometry.dims[2], "stride": 1, "bias": False}
    ops = [layer_op(gemm_kind, geometry.input_shape, gemm_params, dtype, on, gen)]
    for kind, params in tail:
        ops.append(layer_op(kind, geometry.tail_shape, params, dtype, on, gen))
    x = seeded_randn(gen, geometry.input_shape, dtype, on)
    inputs = [x] + [tensor for tensors, _ in ops for tensor in tensors]

    def forward(x, *tensors):
        for op_tensors, apply in ops:
            count = len(op_tensors)
            x = apply(x, tensors[:count], None)
            tensors = tensors[count:]
        return x

    dy = seeded_randn(gen, geometry.tail_shape, dtype, on, grad=False)
    return forward, inputs, dy


def _compile(forward: Callable, inputs: list, dy: Any, chain: str,
             device: str) -> tuple[Callable, float]:
    """The compiled chain, and the seconds of its first forward and backward (tracing, codegen)."""
    import torch

    # A fresh graph per chain and size: no recompilation limit, no dynamic shapes.
    torch._dynamo.reset()
    compiled = torch.compile(forward, dynamic=False)
    start = time.perf_counter()
    with one_cpu_thread(device):  # as lean_bench runs it: a change of thread count recompiles
        try:
            torch.autograd.grad(compiled(*inputs), inputs, dy)
            if device == "cuda":
                torch.cuda.synchronize()
        except Exception as e:  # inductor, Triton or the C compiler failed: say which chain
            reason = f"{type(e).__name__}: {str(e).strip()[:300]}"
            raise RuntimeError(f"torch.compile failed on chain {chain!r} ({reason}); "
                               "run it with modes=('eager',)") from e
    return compiled, time.perf_counter() - start


def _bytes_needed(points: list, dtype: str) -> int:
    """Bytes the largest chain of ``points`` allocates, a bound: the input and its gradient,
    ten output-sized tensors (the tail's intermediates, dy, gradients), a 3×3 weight and its
    gradient."""
    needed = [0]
    for chain, size, *_ in points:
        batch, c_in, c_out, height = _geometry(chain, size).dims
        pixels = height * height
        elements = 2 * batch * c_in * pixels + 10 * batch * c_out * pixels + 18 * c_in * c_out
        needed.append(elements * itemsize(dtype))
    return max(needed)


@register("fusion_chains",
          "A GEMM and the memory-bound ops after it (conv → batch norm → ReLU; "
          "linear → bias → GELU → dropout), eager against torch.compile: "
          "bytes the byte model says fusion saves, time saved",
          _CHAIN_COLUMNS, needs=("cuda", "triton"))
def fusion_chains(*, chains=None, modes=MODES, dtype="float16", device="auto", quick=False,
                  progress=True, on_row=None) -> pd.DataFrame:
    """Each chain and size, eager then compiled, forward and forward+backward.

    GPU: both chains at two sizes, one compile each; CPU or ``quick``: the linear chain, small
    (CPU: float32, 10–20 s to compile). Without a C compiler, no compiled rows. Compiling resets
    ``torch._dynamo``: your compiled functions recompile.
    """
    import torch

    names = known_names("chains", chains, CHAINS) if chains is not None else None
    modes = sequence_of("modes", modes, lambda n, mode: one_of(n, mode, MODES), single=True)
    dtype = dtype_name("dtype", dtype, _DTYPES)
    device = resolve_device(device)
    if names is None:
        names = ["linear_bias_gelu_dropout"] if quick or device == "cpu" else list(CHAINS)
    if device == "cpu":
        dtype = "float32"  # CPUs have no fast float16
    missing = compiler_missing(device) if "compiled" in modes else None
    if missing:
        print(f"fusion_chains: compiled rows left out: {missing}")
        modes = [mode for mode in modes if mode != "compiled"]
    spec = measured_spec(device, cpu=False)
    table = _CPU_SIZES if device == "cpu" else _GPU_SIZES
    sizes = {chain: table[chain][:1] if quick else table[chain] for chain in names}
    points = [(chain, size, mode, phase) for chain in names for size in sizes[chain]
              for mode in modes for phase in PHASES]
    ensure_fits(_bytes_needed(points, dtype), device, what="fusion_chains")

    @functools.lru_cache(maxsize=1)  # one chain alive at a time
    def build(chain: str, size: tuple) -> tuple[Callable, list, Any]:
        return _chain_fn(chain, size, dtype, device)

    @functools.lru_cache(maxsize=1)
    def build_compiled(chain: str, size: tuple) -> tuple[Callable, float]:
        forward, inputs, dy = build(chain, size)
        return _compile(forward, inputs, dy, chain, device)

    def measure(point: tuple) -> dict[str, Any]:
        chain, size, mode, phase = point
        forward, inputs, dy = build(chain, size)
        compile_s = _NAN
        if mode == "compiled":
            forward, compile_s = build_compiled(chain, size)
        if phase == "forward":
            def step():
                return forward(*inputs)
        else:
            def step():
                return torch.autograd.grad(forward(*inputs), inputs, dy)
        m = lean_bench(step, device, f"{chain} {mode} {phase} {size}")
        return _chain_row(chain, size, dtype, mode, phase, spec, m, compile_s)

    try:
        return sweep(points, measure, on_row=on_row, progress=progress, desc="fusion")
    finally:  # free the last chain, and dynamo's cache of it
        build.cache_clear()
        build_compiled.cache_clear()
        if "compiled" in modes:
            torch._dynamo.reset()


def fusion_savings(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """Per chain, size and phase: ``eager_s`` and ``compiled_s``, ``speedup`` (eager ÷ compiled),
    ``time_saved_s``, ``bytes_saved`` (byte model), the model's ``predicted_saved_s`` and
    ``predicted_speedup``, and ``compile_s``. Seconds and bytes. Pure: None in, None out."""
    if frame is None:
        return None
    keys = ["chain", "batch", "in_features", "out_features", "size", "phase"]
    eager = frame[frame["mode"] == "eager"].set_index(keys)
    compiled = frame[frame["mode"] == "compiled"].set_index(keys)
    pairs = eager.merge(compiled, left_index=True, right_index=True, suffixes=("", "_c"))
    eager_s, compiled_s = pairs["time_s"], pairs["time_s_c"]
    predicted_eager_s, predicted_compiled_s = pairs["predicted_s"], pairs["predicted_s_c"]
    savings = pd.DataFrame({
        "eager_s": eager_s,
        "compiled_s": compiled_s,
        "speedup": eager_s / compiled_s,
        "time_saved_s": eager_s - compiled_s,
        "bytes_saved": pairs["bytes_eager"] - pairs["bytes_fused"],
        "predicted_saved_s": predicted_eager_s - predicted_compiled_s,
        "predicted_speedup": predicted_eager_s / predicted_compiled_s,
        "compile_s": pairs["compile_s_c"],
    })
    return savings.reset_index()


def predicted_chains(spec: Any, *, dtype: str = "float16") -> pd.DataFrame:
    """``fusion_chains`` at its GPU sizes by the models of ``spec`` alone: its columns, ``time_s``
    NaN. Caption it with :func:`perfkit.provenance.modelled`."""
    dtype = dtype_name("dtype", dtype, _DTYPES)
    rows = [_chain_row(chain, size, dtype, mode, phase, spec)
            for chain in CHAINS for size in _GPU_SIZES[chain] for mode in MODES for phase in PHASES]
    return pd.DataFrame(rows, columns=list(_CHAIN_COLUMNS))
