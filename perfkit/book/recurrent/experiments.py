"""Recurrent-layer experiments (the RNN chapter, E11 and E12): GEMMs per cell, combining over time,
hidden and minibatch sizes, cuDNN against a loop of GEMMs, and a persistent kernel.

A layer of ``hidden`` units H with ``g = RNN_GATES[cell]`` gates does two GEMMs
(:func:`perfkit.shapes.rnn_gemms`): the input GEMM ``(g·H, batch·T, X)``, independent across the
T time steps, and the recurrent GEMM ``(g·H, batch, H)``, repeated T times in sequence. Rows hold
``time_s`` (median seconds from :func:`perfkit.timing.bench`), ``iqr_s``, ``tflops`` (1e12 FLOP/s)
and, where the GEMM model applies, ``predicted_s`` (:func:`perfkit.gemm_model.predict_gemm_time`).
On a CPU (or with ``quick``) the same code runs tiny sizes (hidden ≤ 256, T ≤ 16) in seconds.

Analyses of the frames, and the tables the chapter shows, are in
:mod:`perfkit.book.recurrent.analysis` (the three the tests and verdicts use are re-exported here).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import pandas as pd

from ..._validate import dtype_name, one_of, positive_int, sequence_of
from ...dtypes import itemsize, torch_dtype
from ...kernels import cupy_rnn
from ...kernels.cupy_rnn import rnn_reference
from ...matmul import matmul_fn, matmul_operands, seeded_on
from ...placement import ensure_fits, measured_on, resolve_device, tensor_device, timer
from ...roofline import gemm_bytes
from ...shapes import RNN_GATES, rnn_gemms
from ...units import format_time
from ...experiments.measure import gemm_row, predicted_s, require_gpu, sweep, timing_row
from ...experiments.registry import register
from .analysis import DEEPBENCH_LAYERS, combine_speedup, deepbench_comparable, throughput_ratio

__all__ = ["CELLS", "DEEPBENCH_LAYERS", "PERSISTENT_ATOL", "combine_speedup", "deepbench_comparable", "gemm_loop",
           "rnn_batch", "rnn_combine_time", "rnn_cudnn", "rnn_hidden", "rnn_persistent", "throughput_ratio"]

#: The cells, by the names :func:`perfkit.shapes.rnn_gemms` uses.
CELLS: tuple[str, ...] = tuple(RNN_GATES)

_SHAPE = dict(cell="'rnn' (vanilla), 'gru' or 'lstm'", hidden="hidden units H", batch="minibatch size",
              dtype="data type of the operands")
_GEMM = dict(M="rows of the GEMM: gates·H", N="columns: the minibatch (times T when combined)",
             K="inner dimension: H (recurrent) or the input size", time_s="median duration, seconds",
             iqr_s="inter-quartile range of the samples, seconds", tflops="GEMM math / time_s, in 1e12 FLOP/s",
             predicted_s="perfkit.model prediction of the same GEMM(s), seconds")


def _many(name: str, value: Any, check: Callable[[str, Any], Any]) -> list:
    """``value`` (one item or a sequence of them) as a list, each item checked and named ``name``."""
    return sequence_of(name, value, check, single=True)


def _layer_spec(name: str, value: Any) -> tuple[str, int, int, int]:
    """A ``(cell, hidden, batch, timesteps)`` tuple of ``rnn_cudnn``'s ``layers``, checked."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)) or len(value) != 4:
        raise TypeError(f"{name} must hold (cell, hidden, batch, timesteps) tuples, got {value!r}")
    c, h, b, t = value
    return (one_of(f"{name}: cell", c, CELLS), positive_int(f"{name}: hidden", h), positive_int(f"{name}: batch", b),
            positive_int(f"{name}: timesteps", t))


def _cells(value: Any) -> list[str]:
    """``value`` (a cell name or several) as a list of names from :data:`CELLS`."""
    return _many("cell", value, lambda n, v: one_of(n, v, CELLS))


def _sizes(name: str, value: Any, small: bool, tiny: tuple, full: tuple) -> list[int]:
    """``value`` if given, else ``tiny`` (CPU or quick) or ``full`` (GPU); positive integers."""
    return _many(name, value if value is not None else tiny if small else full, positive_int)


def _bench(fn: Callable[[], Any], device: str, **kw: Any):
    """:func:`perfkit.timing.bench` on ``device``, sampling at most 0.5 s on a CPU (whose runs show a mechanism)."""
    return timer(fn, device=device, max_time_s=0.5 if device == "cpu" else 10.0, **kw)


@register("rnn_combine_time", "Input GEMMs of T time steps: one GEMM of N = batch·T against T GEMMs of N = "
          "batch (Baidu SVAIL 2015, 'combine over time')",
          dict(_SHAPE, timesteps="sequence length T", method="'combined' (one GEMM) or 'per step' (T GEMMs)",
               **{k: _GEMM[k] for k in ("M", "N", "K")}, gemms="GEMM calls per measurement: 1 or T",
               time_s="median duration of all T steps' input GEMMs, seconds", iqr_s=_GEMM["iqr_s"],
               tflops="2·M·batch·T·K / time_s, in 1e12 FLOP/s",
               predicted_s="perfkit.model: one GEMM, or T times the per-step GEMM, seconds"),
          needs=("cuda",))
def rnn_combine_time(*, cell=CELLS, hidden=None, batch=None, timesteps=None, dtype="float16", device="auto",
                     quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """Each cell, H and batch, T from 8 to 512 (GPU) or 4 and 16 (CPU/quick); input size = H (float32 on a CPU)."""
    dtype = dtype_name("dtype", dtype)
    device = resolve_device(device)
    small = quick or device == "cpu"
    cells, hs = _cells(cell), _sizes("hidden", hidden, small, (64,), (1024, 2560))
    bs = _sizes("batch", batch, small, (1, 4), (1, 4, 16, 64))
    ts = _sizes("timesteps", timesteps, small, (4, 16), (8, 32, 128, 512))
    dtype, spec = "float32" if device == "cpu" else dtype, measured_on()  # CPUs: no fast fp16
    shapes = [(c, h, b, t) for c in cells for h in hs for b in bs for t in ts]
    ensure_fits(max(gemm_bytes(*rnn_gemms(c, h, h, b, t)["input"], dtype) for c, h, b, t in shapes), device,
                what="rnn_combine_time")

    def measure(p):
        (c, h, b, t), method = p
        M, NT, K = rnn_gemms(c, h, h, b, t)["input"]
        extra = dict(cell=c, hidden=h, batch=b, timesteps=t, method=method, gemms=1 if method == "combined" else t)
        if method == "combined":
            m = _bench(matmul_fn(M, NT, K, dtype, device), device, label=f"input gemm {M}×{NT}×{K}")
            return dict(gemm_row(M, NT, K, dtype, m, **extra), N=NT, predicted_s=predicted_s(M, NT, K, dtype, spec))
        import torch

        a, x = matmul_operands(M, NT, K, dtype, device)
        steps = [x[:, i * b:(i + 1) * b] for i in range(t)]  # views of the same columns: no copy
        m = _bench(lambda: [torch.matmul(a, s) for s in steps], device, label=f"{t} input gemms {M}×{b}×{K}")
        return dict(gemm_row(M, NT, K, dtype, m, **extra), N=b, predicted_s=t * predicted_s(M, b, K, dtype, spec))

    points = [(s, meth) for s in shapes for meth in ("combined", "per step")]
    return sweep(points, measure, on_row=on_row, progress=progress, desc="combine over time")


@register("rnn_hidden", "Recurrent GEMM (gates·H, batch, H) as H steps around multiples of 32, 64 and 256 "
          "(NVIDIA Recurrent Layers guide; Baidu SVAIL 2015: 1000 vs 1024, 2560 vs 2568)",
          dict(_SHAPE, **_GEMM, multiple="largest power of two ≤ 256 dividing H"), needs=("cuda",))
def rnn_hidden(*, cell=("rnn", "lstm"), hidden=None, batch=None, dtype="float16", device="auto", quick=False,
               progress=True, on_row=None) -> pd.DataFrame:
    """H = 1024, 2048, 2560 ± 1, 8, 16, 24, 32 at batch 32 and 128 (GPU); H near 128 and 256 (CPU/quick)."""
    dtype = dtype_name("dtype", dtype)
    device = resolve_device(device)
    small = quick or device == "cpu"
    centres = (128, 256) if small else (1024, 2048, 2560)
    offsets = (-8, -1, 0, 1, 8) if small else (-32, -24, -16, -8, -1, 0, 1, 8, 16, 32)
    default_h = sorted({c + d for c in centres for d in offsets if c + d <= centres[-1] or not small})
    points = [(c, h, "NN", b) for c in _cells(cell) for b in _sizes("batch", batch, small, (8,), (32, 128))
              for h in _many("hidden", hidden if hidden is not None else default_h, positive_int)]
    return _recurrent_sweep(points, dtype, device, "rnn_hidden", on_row, progress)


@register("rnn_batch", "Recurrent GEMM (gates·H, batch, H) against the minibatch 1…256, weight used as stored "
          "(NN) or through a transposed view (TN) (Baidu SVAIL 2015: ×14 from 1 to 32; 125 vs 128)",
          dict(_SHAPE, **_GEMM, layout="'NN' or 'TN': the weight (A) read through a transposed view"),
          needs=("cuda",))
def rnn_batch(*, cell=("rnn", "lstm"), hidden=None, batch=None, dtype="float16", device="auto", quick=False,
              progress=True, on_row=None) -> pd.DataFrame:
    """Batch 1…256 (8 and 9, 125 and 128 included) at H = 1024 and 2560 (GPU), 256 (CPU/quick), NN and TN."""
    dtype = dtype_name("dtype", dtype)
    device = resolve_device(device)
    small = quick or device == "cpu"
    hs = _sizes("hidden", hidden, small, (256,), (1024, 2560))
    bs = _sizes("batch", batch, small, (1, 2, 4, 8, 9, 16, 32, 64, 125, 128, 256),
                (1, 2, 4, 8, 9, 16, 24, 32, 48, 64, 96, 125, 128, 160, 192, 256))
    points = [(c, h, lay, b) for c in _cells(cell) for h in hs for lay in ("NN", "TN") for b in bs]
    return _recurrent_sweep(points, dtype, device, "rnn_batch", on_row, progress)


def _recurrent_sweep(points: list, dtype: Any, device: str, name: str, on_row, progress: bool) -> pd.DataFrame:
    """Time the recurrent GEMM of each (cell, H, layout, batch): the rows of rnn_hidden and rnn_batch."""
    dtype, spec = "float32" if device == "cpu" else dtype, measured_on()  # CPUs: no fast fp16
    ensure_fits(max(gemm_bytes(*rnn_gemms(c, h, h, b, 1)["recurrent"], dtype) for c, h, _, b in points), device,
                what=name)

    def measure(p):
        c, h, lay, b = p
        M, N, K = rnn_gemms(c, h, h, b, 1)["recurrent"]
        m = _bench(matmul_fn(M, N, K, dtype, device, lay), device, label=f"recurrent gemm {M}×{N}×{K} {lay}")
        extra = dict(multiple=math.gcd(h, 256)) if name == "rnn_hidden" else dict(layout=lay)
        return gemm_row(M, N, K, dtype, m, cell=c, hidden=h, batch=b, predicted_s=predicted_s(M, N, K, dtype, spec),
                        **extra)

    return sweep(points, measure, on_row=on_row, progress=progress, desc=name.replace("_", " "))


def gemm_loop(module, x, *, input_projection: bool = True):
    """The forward pass of a one-layer, seq-first ``nn.RNN``/``nn.GRU``/``nn.LSTM`` as a loop of GEMMs.

    One input GEMM over all T steps (skipped with ``input_projection=False``: ``x`` is then already
    ``x·W_ih^T + b_ih``, (T, batch, gates·H)), then per step one recurrent GEMM ``h·W_hh^T`` and the
    cell's element-wise math (torch's gate order). Zero initial state; returns ``module(x)[0]``'s numbers.
    """
    import torch

    cell = {"RNN": "rnn", "GRU": "gru", "LSTM": "lstm"}.get(type(module).__name__)
    if cell is None or module.num_layers != 1 or module.bidirectional or module.batch_first:
        raise ValueError(f"module must be a one-layer, unidirectional, seq-first nn.RNN, GRU or LSTM, got {module!r}")
    w, b_hh = module.weight_hh_l0, getattr(module, "bias_hh_l0", None)
    xp = torch.nn.functional.linear(x, module.weight_ih_l0, getattr(module, "bias_ih_l0", None)) \
        if input_projection else x
    if b_hh is not None and cell != "gru":  # GRU applies the reset gate to W_hh·h + b_hh: keep it apart
        xp = xp + b_hh
    act = torch.relu if getattr(module, "nonlinearity", "tanh") == "relu" else torch.tanh
    h = xp.new_zeros(xp.shape[1], module.hidden_size)
    c, out = h, []
    for t in range(xp.shape[0]):
        if cell == "gru":
            gh = h @ w.t() if b_hh is None else torch.addmm(b_hh, h, w.t())
            (xr, xz, xn), (hr, hz, hn) = xp[t].chunk(3, 1), gh.chunk(3, 1)
            r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
            n = torch.tanh(xn + r * hn)
            h = n + z * (h - n)
        elif cell == "rnn":
            h = act(torch.addmm(xp[t], h, w.t()))
        else:
            i, f, g, o = torch.addmm(xp[t], h, w.t()).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        out.append(h)
    return torch.stack(out)


def _layer(cell: str, hidden: int, input_size: int, dtype: str, device: str, nonlinearity: str = "relu"):
    """A seeded nn module in ``dtype`` on ``device``, weights frozen (no autograd graph), train mode
    (built on the meta device directly on a pretend GPU)."""
    import torch

    on = tensor_device(device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        kw = dict(nonlinearity=nonlinearity) if cell == "rnn" else {}
        if on == "meta":  # a pretend GPU: shapes only, no weights drawn
            kw["device"] = "meta"
        mod = {"rnn": torch.nn.RNN, "gru": torch.nn.GRU, "lstm": torch.nn.LSTM}[cell](input_size, hidden, **kw)
    return mod.to(device=on, dtype=torch_dtype(dtype)).requires_grad_(False)


def _inputs(shape: tuple[int, ...], dtype: str, device: str):
    """A seeded standard-normal tensor of ``shape`` in ``dtype`` on ``device``."""
    import torch

    on, gen = seeded_on(device, seed=1)
    return torch.randn(shape, generator=gen, device=on, dtype=torch.float32).to(torch_dtype(dtype))


_CPU_LAYERS = (("rnn", 64, 4, 8), ("gru", 64, 4, 8), ("lstm", 64, 4, 8), ("lstm", 128, 8, 16))


def _layer_bytes(cell: str, h: int, b: int, t: int, dtype: str) -> int:
    """Bytes a layer's forward pass allocates: both weights, input, projection, gates and outputs."""
    g = RNN_GATES[cell]
    return itemsize(dtype) * (2 * g * h * h + t * b * (h + 2 * g * h + 2 * h))


@register("rnn_cudnn", "A whole recurrent layer's forward pass: cuDNN (nn.RNN/GRU/LSTM) against a loop of "
          "GEMMs, eager and replayed from a CUDA graph, at DeepBench's training shapes",
          dict(_SHAPE, timesteps="sequence length T", impl="'cudnn' (nn module on a GPU; 'torch cpu' on a CPU, "
               "where torch does not use cuDNN), 'gemm loop' or 'gemm loop (CUDA graph)'",
               time_s="median forward seconds of the layer, input GEMM included, L2 not flushed (as DeepBench)",
               iqr_s=_GEMM["iqr_s"],
               step_s="time_s / T, seconds", input_gemm_s="median seconds of the layer's input GEMM alone "
               "(one GEMM over all T steps), measured apart", tflops="2·gates·H·(input + H)·batch·T / time_s, "
               "in 1e12 FLOP/s", predicted_s="perfkit.model: one input GEMM + T recurrent GEMMs, seconds"),
          needs=("cuda",))
def rnn_cudnn(*, layers=None, dtype="float16", device="auto", quick=False, progress=True,
              on_row=None) -> pd.DataFrame:
    """``layers``: (cell, hidden, batch, T) tuples; default :data:`DEEPBENCH_LAYERS` on a GPU, four tiny ones
    on a CPU or with ``quick``. Input size = H (as DeepBench). Vanilla cells use ReLU (as DeepBench)."""
    dtype = dtype_name("dtype", dtype)
    layers = sequence_of("layers", layers, _layer_spec) if layers is not None else None
    device = resolve_device(device)
    layers = layers if layers is not None else _CPU_LAYERS if quick or device == "cpu" else DEEPBENCH_LAYERS
    dtype, spec = "float32" if device == "cpu" else dtype, measured_on()  # CPUs: no fast fp16
    ensure_fits(max(_layer_bytes(*lay, dtype) for lay in layers), device, what="rnn_cudnn")
    impls = ("cudnn", "gemm loop", "gemm loop (CUDA graph)") if device == "cuda" else ("torch cpu", "gemm loop")
    kept: dict[tuple, tuple] = {}  # the module, input, input-GEMM time and prediction of the current layer

    def measure(p):
        (c, h, b, t), impl = p
        if (c, h, b, t) not in kept:
            kept.clear()
            mod, x = _layer(c, h, h, dtype, device), _inputs((t, b, h), dtype, device)
            gemms = rnn_gemms(c, h, h, b, t)
            (M, N, K), R = gemms["input"], gemms["recurrent"]
            ig = _bench(matmul_fn(M, N, K, dtype, device), device, label=f"input gemm {M}×{N}×{K}").median
            kept[(c, h, b, t)] = (mod, x, ig, predicted_s(M, N, K, dtype, spec) + t * predicted_s(*R, dtype, spec))
        mod, x, ig, pred = kept[(c, h, b, t)]
        fn = (lambda: mod(x)) if impl in ("cudnn", "torch cpu") else (lambda: gemm_loop(mod, x))
        m = _bench(fn, device, flush_l2=False, cuda_graph=impl.endswith("graph)"),
                  label=f"{c} {h}×{b}×{t} {impl}")
        flops = 2 * RNN_GATES[c] * h * 2 * h * b * t
        return dict(cell=c, hidden=h, batch=b, timesteps=t, dtype=dtype, impl=impl, **timing_row(m),
                    step_s=m.median / t, input_gemm_s=ig, tflops=m.tflop_s(flops), predicted_s=pred)

    return sweep([(lay, i) for lay in layers for i in impls], measure, on_row=on_row, progress=progress,
                 desc="RNN layers")


# --- Persistent RNN (E12)

#: Largest |persistent − reference| accepted before a shape is timed (fp16 outputs in [-1, 1]).
PERSISTENT_ATOL = 3e-2


@register("rnn_persistent", "Vanilla RNN recurrence h_t = tanh(x_t + W·h_(t-1)) at small minibatches: "
          "perfkit's persistent kernel (weights kept on chip) against cuDNN and a loop of GEMMs "
          "(Baidu SVAIL 2016, Persistent RNNs)",
          dict(impl="'persistent', 'cudnn' or 'gemm loop'", hidden="hidden units H", batch="minibatch size",
               timesteps="sequence length T", dtype="data type (float16)",
               time_s="median seconds of the T-step recurrence (input projection excluded; cuDNN: its layer "
               "time minus its input GEMM, measured apart); NaN when the kernel refused the shape",
               iqr_s=_GEMM["iqr_s"], step_s="time_s / T, seconds",
               tflops="recurrent math 2·H²·batch·T / time_s, in 1e12 FLOP/s",
               predicted_s="perfkit.model: T recurrent GEMMs, seconds",
               note="why a row has no time (the kernel's refusal), or how it was timed"),
          needs=("cuda", "cupy"))
def rnn_persistent(*, hidden=None, batch=None, timesteps=None, device="auto", quick=False, progress=True,
                   on_row=None) -> pd.DataFrame:
    """H 512…2048 and 4096, batch 1…64, T = 64 (quick: H 512, 1024; batch 1, 4, 16; T = 16), float16.

    Each shape's kernel output is first checked against ``rnn_reference`` (max abs error ≤ :data:`PERSISTENT_ATOL`,
    else ``RuntimeError``: a wrong kernel is never timed). A shape the kernel refuses (weights too big for the
    chip) gets a ``persistent`` row with NaN times and the reason in ``note``, so the grid shows where it stops.
    """
    hs = _sizes("hidden", hidden, quick, (512, 1024), (512, 1024, 1536, 2048, 4096))
    bs = _sizes("batch", batch, quick, (1, 4, 16), (1, 2, 4, 8, 16, 32, 64))
    T = positive_int("timesteps", timesteps if timesteps is not None else 16 if quick else 64)
    device = resolve_device(device)
    require_gpu(device, "rnn_persistent", runs="times a CUDA kernel", instead="show the recorded data "
                "(perfkit.run_or_load) and run perfkit.rnn_reference for the math")
    dtype, spec = "float16", measured_on()
    ensure_fits(max(_layer_bytes("rnn", h, b, T, dtype) for h in hs for b in bs), device, what="rnn_persistent")

    def measure(p):
        h, b, impl = p
        mod, xp = _layer("rnn", h, h, dtype, device, nonlinearity="tanh"), _inputs((T, b, h), dtype, device)
        w = mod.weight_hh_l0
        row = dict(impl=impl, hidden=h, batch=b, timesteps=T, dtype=dtype,
                   predicted_s=T * predicted_s(h, b, h, dtype, spec), note="")
        if impl == "persistent":
            try:
                out = cupy_rnn.persistent_rnn(xp, w)
            except ValueError as e:  # the shape does not fit this GPU's chip: no time, the reason kept
                return dict(row, **dict.fromkeys(("time_s", "iqr_s", "step_s", "tflops"), math.nan),
                            note=f"refused: {e}")
            err = (out.float() - rnn_reference(xp, w).float()).abs().max().item()
            if not err <= PERSISTENT_ATOL:
                raise RuntimeError(f"persistent_rnn differs from rnn_reference by {err:.3g} at H={h}, batch={b}, "
                                   f"T={T} (tolerance {PERSISTENT_ATOL}); not timing a wrong kernel")
            fn, sub = (lambda: cupy_rnn.persistent_rnn(xp, w)), 0.0
            row["note"] = f"checked against rnn_reference (max error {err:.1g})"
        elif impl == "cudnn":  # nn.RNN includes its input GEMM: measure it apart and subtract
            fn = lambda: mod(xp)  # noqa: E731  (xp serves as the layer's input x here)
            sub = _bench(matmul_fn(h, b * T, h, dtype, device), device, label="input gemm").median
            row["note"] = f"layer time minus its input GEMM ({format_time(sub)})"
        else:
            fn, sub = (lambda: gemm_loop(mod, xp, input_projection=False)), 0.0
        m = _bench(fn, device, flush_l2=False, label=f"{impl} rnn {h}×{b}×{T}")
        t = m.median - sub
        return dict(row, time_s=t, iqr_s=m.iqr, step_s=t / T, tflops=2 * h * h * b * T / t / 1e12)

    points = [(h, b, i) for h in hs for b in bs for i in ("persistent", "cudnn", "gemm loop")]
    return sweep(points, measure, on_row=on_row, progress=progress, desc="persistent RNN")
