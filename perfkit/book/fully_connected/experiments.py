"""Fully-connected layer experiments (the FC chapter): passes, batch, feature counts, vocabulary padding.

A linear layer with I inputs and O outputs at batch B is three GEMMs (NVIDIA's Linear/Fully-Connected
guide; :func:`perfkit.shapes.linear_gemms`): forward (M, N, K) = (O, B, I), activation gradient
(I, B, O) and weight gradient (I, O, B). Every row has ``time_s`` (median seconds) and ``tflops``
(useful FLOPs / time_s / 1e12); ``predicted_s`` is :func:`perfkit.gemm_model.predict_gemm_time`.
On a CPU (or with ``quick``) the same code runs small sizes in float32, in seconds.

Analyses of the frames, and the tables the chapter shows, are in
:mod:`perfkit.book.fully_connected.analysis` (its three frame analyses are re-exported here).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._validate import dtype_name, one_of, positive_int, sequence_of
from ...dtypes import canonical_dtype, itemsize, torch_dtype
from ...gemm_alignment import LINEAR_LAYOUTS
from ...gemm_model import explain_gemm
from ...matmul import matmul_fn, seeded_on
from ...placement import ensure_fits, resolve_device, timer
from ...quantization import pad_to_multiple
from ...roofline import arithmetic_intensity, gemm_bytes, gemm_flops
from ...shapes import linear_gemms
from ...experiments.measure import gemm_row, measured_spec, sweep, timing_row
from ...experiments.registry import register
from .analysis import feature_effects, pass_overhead, vocab_savings  # noqa: F401  (re-exported)
from .pricing import PASS_LAYOUTS, predicted as _predicted, vocab_predicted_s

__all__ = ["FC_DTYPES", "PASS_LAYOUTS", "fc_batch", "fc_features", "fc_passes", "feature_effects",
           "feature_points", "pass_overhead", "predicted_features", "predicted_vocab", "vocab_padding",
           "vocab_savings"]

#: Storage dtypes the FC experiments accept (a CPU always runs float32).
FC_DTYPES = ("float16", "bfloat16", "float32")

_SHAPE = {"M": "GEMM rows (NVIDIA's table: out features in the forward pass)",
          "N": "GEMM columns (the batch in forward and dgrad)", "K": "GEMM inner dimension",
          "dtype": "storage dtype of the operands", "time_s": "median duration, seconds",
          "iqr_s": "inter-quartile range of the samples, seconds", "tflops": "2·M·N·K / time_s, in 1e12 FLOP/s"}
_LAYER = {"batch": "rows of the layer's input (tokens or samples)", "in_features": "layer inputs",
          "out_features": "layer outputs"}
_MODEL = {"predicted_s": "perfkit.gemm_model prediction for the GEMM on this device, seconds"}


def _setup(device, dtype, quick):
    """(device, dtype, small): ``dtype`` checked against :data:`FC_DTYPES` first; a CPU runs float32."""
    asked = dtype_name("dtype", dtype, FC_DTYPES)
    device = resolve_device(device)
    return device, "float32" if device == "cpu" else asked, quick or device == "cpu"


def _ints(name, values):
    return sequence_of(name, values, positive_int)


def _layer_bytes(B, I, O, dtype):
    """Bytes of a layer's tensors and their gradients: input, weight, output (×2 with gradients)."""
    return 2 * itemsize(dtype) * (B * I + I * O + B * O)


def _linear_fns(B, I, O, dtype, device):
    """Zero-argument functions for the three passes of ``nn.Linear(I, O)`` at batch B, through autograd."""
    import torch

    on, gen = seeded_on(device)
    dt = torch_dtype(dtype)
    x = torch.randn(B, I, generator=gen, device=on).to(dt).requires_grad_(True)
    layer = torch.nn.Linear(I, O, device=on, dtype=dt)
    y = layer(x)
    g = torch.randn(B, O, generator=gen, device=on).to(dt)
    return {"forward": lambda: layer(x),
            "dgrad": lambda: torch.autograd.grad(y, x, g, retain_graph=True),
            "wgrad": lambda: torch.autograd.grad(y, layer.weight, g, retain_graph=True)}


@register("fc_passes", "Forward, activation-gradient and weight-gradient GEMMs of an nn.Linear (NVIDIA's FC "
          "table), timed through autograd and as the same three GEMMs alone",
          dict(phase="'forward', 'dgrad' (activation gradient) or 'wgrad' (weight gradient)",
               impl="'autograd' (nn.Linear with bias, torch.autograd.grad) or 'gemm' (torch.matmul alone)",
               **_LAYER, **_SHAPE, layout="BLAS layout of the GEMM (torch's names, A then B)",
               intensity="FLOP per byte with each matrix moved once", **_MODEL),
          needs=("cuda",))
def fc_passes(*, in_features=None, out_features=None, batches=None, dtype="float16", device="auto", quick=False,
              progress=True, on_row=None) -> pd.DataFrame:
    """Each pass of a layer (default 1024 → 4096, NVIDIA's Table 1 layer) at a few batches, both ways.

    GPU: batches 1, 32, 512 and 4096; CPU or ``quick``: 256 → 1024 at 32 and 512 (float32 on a CPU).
    """
    device, d, small = _setup(device, dtype, quick)
    I = positive_int("in_features", in_features if in_features is not None else (256 if small else 1024))
    O = positive_int("out_features", out_features if out_features is not None else (1024 if small else 4096))
    Bs = _ints("batches", batches if batches is not None else ((32, 512) if small else (1, 32, 512, 4096)))
    ensure_fits(_layer_bytes(max(Bs), I, O, d), device, what="fc_passes")
    spec = measured_spec(device)
    points = [(B, impl, phase) for B in Bs for impl in ("autograd", "gemm") for phase in PASS_LAYOUTS]

    def measure(p):
        B, impl, phase = p
        M, N, K = linear_gemms(B, I, O)[phase]
        lay = PASS_LAYOUTS[phase]
        fn = _linear_fns(B, I, O, d, device)[phase] if impl == "autograd" else matmul_fn(M, N, K, d, device, lay)
        m = timer(fn, device=device, label=f"{phase} {impl} {M}×{N}×{K} {d}")
        pred = _predicted(M, N, K, d, spec, LINEAR_LAYOUTS[phase] if impl == "autograd" else lay)
        return gemm_row(M, N, K, d, m, phase=phase, impl=impl, batch=B, in_features=I, out_features=O,
                        layout=lay, intensity=arithmetic_intensity(M, N, K, d),
                        predicted_s=pred.predicted_s if pred else np.nan)

    return sweep(points, measure, on_row=on_row, progress=progress, desc="FC passes")


_BATCH_COLUMNS = dict(_SHAPE, layout="BLAS layout (torch's names): 'NT', the layer's forward x·Wᵀ", **_LAYER,
                      gbps="minimum bytes moved / time_s, 1e9 bytes/s",
                      intensity="FLOP per byte with each matrix moved once", **_MODEL,
                      predicted_bound="what bounds the predicted time: 'math', 'memory' or 'latency'")


@register("fc_batch", "Forward GEMM of a 4096→4096 linear layer as the batch grows from 1 to 8192: duration, "
          "TFLOP/s and intensity against the ridge (NVIDIA FC guide: batch > 128 on V100)",
          _BATCH_COLUMNS, needs=("cuda",))
def fc_batch(*, in_features=None, out_features=None, batches=None, dtype="float16", device="auto", quick=False,
             progress=True, on_row=None) -> pd.DataFrame:
    """Batch sweep of the layer's forward GEMM (M = out, N = batch, K = in), DeepBench's N = 7000 included.

    GPU: 4096 → 4096, B = 1 … 8192; CPU: 1024 → 1024, B = 1 … 512 (float32); ``quick``: fewer batches.
    """
    device, d, _ = _setup(device, dtype, quick)
    cpu = device == "cpu"
    I = positive_int("in_features", in_features if in_features is not None else (1024 if cpu else 4096))
    O = positive_int("out_features", out_features if out_features is not None else (1024 if cpu else 4096))
    if batches is None:
        batches = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if cpu else (1, 16, 64, 128, 256, 512, 1024, 4096) \
            if quick else (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512,
                           640, 768, 1024, 1536, 2048, 3072, 4096, 6144, 7000, 8192)
    Bs = _ints("batches", batches)
    ensure_fits(gemm_bytes(O, max(Bs), I, d), device, what="fc_batch")
    spec = measured_spec(device)

    def measure(B):
        m = timer(matmul_fn(O, B, I, d, device, "NT"), device=device, label=f"fc forward {I}→{O} batch {B} {d}")
        pred = _predicted(O, B, I, d, spec, "NT")  # matmul_fn "NT": C is O×B, its leading dim the batch
        return gemm_row(O, B, I, d, m, layout="NT", batch=B, in_features=I, out_features=O,
                        gbps=m.gbps(gemm_bytes(O, B, I, d)), intensity=arithmetic_intensity(O, B, I, d),
                        predicted_s=pred.predicted_s if pred else np.nan,
                        predicted_bound=pred.bound if pred else "")

    return sweep(Bs, measure, on_row=on_row, progress=progress, desc="FC batch")


def feature_points(center: int, span: int, step: int = 8, odd_every: int = 64) -> list[int]:
    """Feature counts from ``center − span`` to ``center + span``: every multiple of ``step``, and
    m + 1, m + 2, m + 4 after every multiple m of ``odd_every`` (unaligned sizes)."""
    center, span = positive_int("center", center), positive_int("span", span)
    step, odd_every = positive_int("step", step), positive_int("odd_every", odd_every)
    if span >= center:
        raise ValueError(f"span must be smaller than center, got span={span}, center={center}")
    lo, hi = center - span, center + span
    aligned = range(pad_to_multiple(lo, step), hi + 1, step)
    odd = [m + k for m in range(pad_to_multiple(lo, odd_every), hi, odd_every) for k in (1, 2, 4)]
    return sorted(set(aligned) | set(odd))


def _divisible_by(n: int) -> int:
    """The largest power of two ≤ 256 dividing ``n``."""
    return int(min(256, n & -n))


def _feature_rows(sweeps, center, span, fixed, step, odd_every):
    sweeps = sequence_of("sweeps", sweeps, lambda n, s: one_of(n, s, ("in", "out", "batch")), single=True)
    fixed = positive_int("fixed", fixed)
    for n in feature_points(center, span, step, odd_every):
        for s in sweeps:
            B, I, O = (n if s == "batch" else fixed), (n if s == "in" else fixed), (n if s == "out" else fixed)
            yield s, n, B, I, O


_FEATURE_COLUMNS = dict(sweep="which layer dimension is swept: 'in', 'out' or 'batch'",
                        swept="its value (elements)", divisible_by="largest power of two ≤ 256 dividing it",
                        **_LAYER, **_SHAPE, **_MODEL)


@register("fc_features", "Forward GEMM of a layer as its input features, output features or batch step "
          "through values around multiples of 8, 64 and 256 (alignment against tile effects)",
          _FEATURE_COLUMNS, needs=("cuda",))
def fc_features(*, sweeps=("in", "out", "batch"), center=None, span=None, fixed=None, dtype="float16",
                device="auto", quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """One dimension swept over ``center ± span`` (:func:`feature_points`), the other two ``fixed``.

    GPU: 768 … 1280 with the others at 4096 (every multiple of 8, plus m+1, m+2, m+4 after each
    multiple of 64); ``quick``: multiples of 32 and unaligned sizes after multiples of 128; CPU:
    192 … 320 with the others at 256.
    """
    device, d, _ = _setup(device, dtype, quick)
    cpu = device == "cpu"
    center = center if center is not None else (256 if cpu else 1024)
    span = span if span is not None else (64 if cpu else 256)
    fixed = fixed if fixed is not None else (256 if cpu else 4096)
    step, odd_every = (32, 128) if quick else (8, 64)
    points = list(_feature_rows(sweeps, center, span, fixed, step, odd_every))
    ensure_fits(max(gemm_bytes(O, B, I, d) for _, _, B, I, O in points), device, what="fc_features")
    spec = measured_spec(device)

    def measure(p):
        s, n, B, I, O = p
        m = timer(matmul_fn(O, B, I, d, device, "NT"), device=device, label=f"fc {s}={n} {I}→{O} batch {B}")
        pred = _predicted(O, B, I, d, spec, "NT")  # matmul_fn "NT": C is O×B, its leading dim the batch
        return gemm_row(O, B, I, d, m, sweep=s, swept=n, divisible_by=_divisible_by(n), batch=B, in_features=I,
                        out_features=O, predicted_s=pred.predicted_s if pred else np.nan)

    return sweep(points, measure, on_row=on_row, progress=progress, desc="FC features")


def predicted_features(spec, *, dtype: str = "float16", sweeps=("in", "out", "batch"), center: int = 1024,
                       span: int = 256, fixed: int = 4096) -> pd.DataFrame:
    """The model's view of ``fc_features`` on ``spec`` (no measurement): the same points and columns,
    ``time_s``, ``iqr_s`` and ``tflops`` empty, ``predicted_s`` filled. Caption it with
    :func:`perfkit.provenance.modelled`."""
    d = canonical_dtype(dtype)
    rows = []
    for s, n, B, I, O in _feature_rows(sweeps, center, span, fixed, 8, 64):
        rows.append({"sweep": s, "swept": n, "divisible_by": _divisible_by(n), "batch": B, "in_features": I,
                     "out_features": O, "M": O, "N": B, "K": I, "dtype": d, "time_s": np.nan, "iqr_s": np.nan,
                     "tflops": np.nan, "predicted_s": explain_gemm(O, B, I, d, spec).predicted_s})
    return pd.DataFrame(rows, columns=list(_FEATURE_COLUMNS))


def _vocab_fn(phase, impl, multiple, V, I, T, dtype, device):
    """A zero-argument function running one pass of one variant of the projection I → V on T tokens.

    ``"forward+backward"`` returns the gradients of the input and of every parameter (autograd.grad).
    """
    import torch

    from ...padding import padded_linear  # torch: imported when a variant is built

    on, gen = seeded_on(device)
    dt = torch_dtype(dtype)
    width = pad_to_multiple(V, multiple)
    base = torch.nn.Linear(I, width if impl == "linear" else V, device=on, dtype=dt)
    module = base if impl == "linear" else padded_linear(base, multiple, keep_padding=impl.endswith("kept"))
    x = torch.randn(T, I, generator=gen, device=on).to(dt).requires_grad_(True)
    g = torch.randn(T, V if impl.endswith("sliced") else width, generator=gen, device=on).to(dt)
    inputs = [x, *module.parameters()]
    if phase == "forward":
        return lambda: module(x)
    return lambda: torch.autograd.grad(module(x), inputs, g)


_VOCAB_COLUMNS = dict(phase="'forward' or 'forward+backward' (input and weight gradients)",
                      impl="'linear' (nn.Linear of out_features), 'padded_linear, sliced' (keep_padding=False) "
                           "or 'padded_linear, kept' (keep_padding=True)",
                      multiple="the multiple the vocabulary is padded to (1: not padded)",
                      vocab="the real vocabulary (logits the model needs)",
                      out_features="width of the GEMM that runs (the padded vocabulary)",
                      tokens="rows of the input (batch × sequence length)", in_features="model width",
                      dtype="storage dtype", time_s="median duration, seconds",
                      iqr_s="inter-quartile range of the samples, seconds",
                      tflops="useful FLOPs (2·tokens·in_features·vocab per GEMM) / time_s, in 1e12 FLOP/s",
                      predicted_s="perfkit.gemm_model: the pass's GEMMs at out_features, plus for a sliced "
                                  "backward the zero-filled padded gradient and the copy into it (bytes ÷ "
                                  "achievable bandwidth), seconds")


def _vocab_points(multiples):
    variants = [("linear", 1)] + [(impl, m) for m in multiples
                                  for impl in ("linear", "padded_linear, sliced", "padded_linear, kept")]
    return [(phase, impl, m) for phase in ("forward", "forward+backward") for impl, m in variants]


def _vocab_row(phase, impl, m, V, I, T, d, spec, t=None):
    """One ``vocab_padding`` row: measured when ``t`` (a Measurement) is given, else the model alone."""
    timing = timing_row(t) if t is not None else {"time_s": np.nan, "iqr_s": np.nan}
    gemms = 1 if phase == "forward" else 3  # forward+backward: dgrad and wgrad too
    return {"phase": phase, "impl": impl, "multiple": m, "vocab": V, "out_features": pad_to_multiple(V, m),
            "tokens": T, "in_features": I, "dtype": d, **timing,
            "tflops": t.tflop_s(gemms * gemm_flops(T, I, V)) if t is not None else np.nan,
            "predicted_s": vocab_predicted_s(phase, impl, m, V, I, T, d, spec)}


@register("vocab_padding", "Output projection of a language model (768 → GPT-2's 50257 logits) against the "
          "vocabulary padded to 50264 (×8) and 50304 (×64): nn.Linear, and pk.padded_linear sliced or kept",
          _VOCAB_COLUMNS, needs=("cuda",))
def vocab_padding(*, vocab=50257, in_features=None, tokens=None, multiples=(8, 64), dtype="float16",
                  device="auto", quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """Forward and forward+backward of the projection for each vocabulary and implementation.

    GPU: 768 → ``vocab`` at 8192 tokens (8 sequences of 1024); CPU or ``quick``: 64 → ``vocab`` at
    32 tokens (float32 on a CPU), so the GEMMs are small but the vocabulary is the real one.
    """
    device, d, small = _setup(device, dtype, quick)
    V = positive_int("vocab", vocab)
    I = positive_int("in_features", in_features if in_features is not None else (64 if small else 768))
    T = positive_int("tokens", tokens if tokens is not None else (32 if small else 8192))
    ms = _ints("multiples", multiples)
    widest = max(pad_to_multiple(V, m) for m in ms)
    ensure_fits(_layer_bytes(T, I, widest, d) + 2 * itemsize(d) * T * widest, device, what="vocab_padding")
    spec = measured_spec(device)

    def measure(p):
        phase, impl, m = p
        t = timer(_vocab_fn(phase, impl, m, V, I, T, d, device), device=device,
                  label=f"vocab {V}→{pad_to_multiple(V, m)} {impl} {phase}")
        return _vocab_row(phase, impl, m, V, I, T, d, spec, t)

    return sweep(_vocab_points(ms), measure, on_row=on_row, progress=progress, desc="vocabulary padding")


def predicted_vocab(spec, *, vocab: int = 50257, in_features: int = 768, tokens: int = 8192,
                    multiples=(8, 64), dtype: str = "float16") -> pd.DataFrame:
    """The model's view of ``vocab_padding`` on ``spec`` (no measurement): its rows with ``time_s``,
    ``iqr_s`` and ``tflops`` empty. Caption it with :func:`perfkit.provenance.modelled`."""
    V, I, T = positive_int("vocab", vocab), positive_int("in_features", in_features), positive_int("tokens", tokens)
    d = canonical_dtype(dtype)
    rows = [_vocab_row(*p, V, I, T, d, spec) for p in _vocab_points(_ints("multiples", multiples))]
    return pd.DataFrame(rows, columns=list(_VOCAB_COLUMNS))

