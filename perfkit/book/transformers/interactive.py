"""Interactive figures of chapter 07_transformers (see perfkit.interactive).

:func:`decode_roofline`: a slider over the context length. Predicted tokens per second of a decoder
(LLaMA-2-7B by default) against the batch, on each GPU, with multi-head attention and with
grouped-query attention, each line drawn only while the weights and the KV cache fit in the GPU's
memory, and a marker where a step turns math-bound (:func:`perfkit.predict_decode_time`,
:func:`perfkit.decode_step_bytes`).

:func:`attention_split`: a slider over the sequence length. The predicted forward time of unfused
attention split into its three kernels (QKᵀ and PV by :func:`perfkit.predict_gemm_time`, the softmax
by :func:`perfkit.memory_time` of its :func:`perfkit.layer_bytes`, as
:func:`perfkit.predict_attention_time` sums them) beside one fused kernel. Seconds, bytes.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import plotly.graph_objects as go

from ..._validate import dtype_name, positive_int, sequence_of
from ...devices import DeviceSpec, resolve_spec
from ...dtypes import itemsize
from ...provenance import caption, modelled
from ...transformer import attention_bytes, decode_step_bytes, predict_decode_time
from ...units import format_time
from ..interactive import (InteractiveFigure, State, bars_with_slider, distinct_ints, heading, rounded,
                           slider_index, with_slider)
from .analysis import attention_kernels
from .decoding import LLAMA2_7B

__all__ = ["BATCHES", "CONTEXTS", "FIGURES", "SEQS", "attention_split", "decode_roofline", "largest_batch"]

#: The batches on the x axis of :func:`decode_roofline`: 1 … 1024, two points per octave.
BATCHES: tuple[int, ...] = tuple(sorted({round(2 ** (k / 2)) for k in range(21)}))
#: The contexts of :func:`decode_roofline`'s slider, tokens.
CONTEXTS: tuple[int, ...] = tuple(2**k for k in range(7, 16))
#: The sequence lengths of :func:`attention_split`'s slider, tokens.
SEQS: tuple[int, ...] = tuple(2**k for k in range(8, 16))
_MODEL_KEYS = ("params", "layers", "heads", "head_dim")
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


def _decode_dtype(spec: DeviceSpec, dtype: str) -> str:
    """``dtype`` if ``spec`` has a peak for it, else float16 (bfloat16 on a V100), else LookupError."""
    for d in (dtype, "float16"):
        if d in spec.peaks:
            return d
    raise LookupError(f"dtype: {spec.name} has no peak for {dtype!r} nor float16; it has {', '.join(spec.peaks)}")


def largest_batch(model: Mapping[str, int], context: int, kv_heads: int, dtype: Any,
                  spec: str | DeviceSpec) -> int:
    """The largest batch whose weights and KV cache (:func:`perfkit.decode_step_bytes`) fit in
    ``spec.memory_bytes`` (activations not counted: an upper bound); 0 if not even one sequence fits."""
    model, context, kv_heads = _model(model), positive_int("context", context), positive_int("kv_heads", kv_heads)
    dtype, spec = dtype_name("dtype", dtype), resolve_spec(spec, none_ok=False)
    if not spec.memory_bytes:
        raise ValueError(f"spec: the memory size of {spec.name} is unknown")
    sizes = dict(layers=model["layers"], kv_heads=kv_heads, head_dim=model["head_dim"], dtype=dtype)
    weights = model["params"] * itemsize(dtype)
    per_sequence = decode_step_bytes(model["params"], 1, context, **sizes) - weights
    return max(0, (spec.memory_bytes - weights) // per_sequence)


def _model(model: Any) -> dict[str, int]:
    if not isinstance(model, Mapping):
        raise TypeError(f"model must be a dict with the keys {', '.join(_MODEL_KEYS)}, got {type(model).__name__}")
    missing = [k for k in _MODEL_KEYS if k not in model]
    if missing:
        raise ValueError(f"model lacks the keys {missing}; it needs {', '.join(_MODEL_KEYS)}")
    return {k: positive_int(f"model[{k!r}]", model[k]) for k in _MODEL_KEYS}


def _specs(specs: Any) -> list[DeviceSpec]:
    found = sequence_of("specs", specs, lambda n, s: resolve_spec(s, param=n, none_ok=False), single=True)
    if any(s.memory_bytes is None or s.mem_bandwidth is None for s in found):
        raise ValueError("specs must be GPUs with a known memory size and bandwidth")
    if len({s.name for s in found}) != len(found):
        raise ValueError(f"specs must name each GPU once, got {[s.name for s in found]}")
    return found


def decode_roofline(model: Mapping[str, int] = LLAMA2_7B, specs: Sequence[str | DeviceSpec] = ("H100-SXM", "V100-SXM2"),
                    *, model_name: str = "LLaMA-2-7B", kv_heads: Sequence[int] = (32, 8), dtype: Any = "bfloat16",
                    batches: Sequence[int] = BATCHES, contexts: Sequence[int] = CONTEXTS,
                    active: int | None = None) -> InteractiveFigure:
    """Predicted tokens/s (:func:`perfkit.predict_decode_time`) against the batch, one line per GPU of
    ``specs`` and per K/V head count of ``kv_heads``, with a slider over ``contexts`` (tokens).

    ``model``: ``params``, ``layers``, ``heads`` (query heads) and ``head_dim``. ``dtype`` falls back
    to float16 on a GPU without a peak for it (a V100 has no bfloat16). A line stops at the largest
    batch that fits the GPU's memory (:func:`largest_batch`); its marker is the step's
    ``math_bound_batch`` when that batch is drawn. ``active``: the opening context's index (default:
    the context nearest 2048).
    """
    m = _model(model)
    if not isinstance(model_name, str) or not model_name.strip():
        raise TypeError(f"model_name must be a non-empty string, got {model_name!r}")
    gpus = _specs(specs)
    kvs = distinct_ints("kv_heads", kv_heads)
    bad = [k for k in kvs if m["heads"] % k]
    if bad:
        raise ValueError(f"kv_heads must divide the model's heads ({m['heads']}), got {bad}")
    dtype = dtype_name("dtype", dtype)
    dtypes = [_decode_dtype(s, dtype) for s in gpus]
    xs, ctxs = sorted(distinct_ints("batches", batches, 2)), distinct_ints("contexts", contexts, 2)
    active = slider_index(active, ctxs, 2048)

    lines = [(s, d, kv) for s, d in zip(gpus, dtypes) for kv in kvs]
    traces = []
    for k, (s, d, kv) in enumerate(lines):
        colour, attention = _COLOURS[gpus.index(s) % len(_COLOURS)], "MHA" if kv == m["heads"] else f"GQA {kv}"
        group = f"{s.name} {kv}"
        traces.append(go.Scatter(mode="lines+markers", legendgroup=group, marker={"size": 4, "color": colour},
                                 line={"color": colour, "dash": "solid" if kv == m["heads"] else "dash"},
                                 name=f"{s.name}, {attention} ({kv} K/V heads), {d}",
                                 hovertemplate="batch %{x}: %{y:.4s} tokens/s<extra></extra>"))
        traces.append(go.Scatter(mode="markers", legendgroup=group, showlegend=k == 0, name="math-bound from here",
                                 marker={"color": colour, "size": 12, "symbol": "diamond",
                                         "line": {"color": "black", "width": 1}},
                                 hovertemplate="math-bound from batch %{x}<extra></extra>"))

    states = []
    for c in ctxs:
        updates, notes = [], []
        for s, d, kv in lines:
            fit = largest_batch(m, c, kv, d, s)
            first = predict_decode_time(m["params"], 1, c, layers=m["layers"], kv_heads=kv, head_dim=m["head_dim"],
                                        dtype=d, spec=s, heads=m["heads"]).math_bound_batch
            ends = {n for n in (fit, first) if n is not None and xs[0] < n < xs[-1] and n <= fit}
            shown = sorted({n for n in xs if n <= fit} | ends)
            preds = [predict_decode_time(m["params"], n, c, layers=m["layers"], kv_heads=kv, head_dim=m["head_dim"],
                                         dtype=d, spec=s, heads=m["heads"]) for n in shown]
            updates.append({"x": shown, "y": rounded([p.tokens_per_s for p in preds])})
            if first is not None and first in shown:
                updates.append({"x": [first], "y": rounded([preds[shown.index(first)].tokens_per_s])})
            else:
                updates.append({"x": [], "y": []})
            where = ("never math-bound" if first is None else f"math-bound from batch {first}"
                     + ("" if first <= fit else " (beyond memory)"))
            notes.append((s, f"{'MHA' if kv == m['heads'] else f'GQA {kv}'} fits batch ≤ {fit}, {where}"))
        note = f"context {c} tokens (predicted: an upper bound, no kernel overheads):<br>" + "<br>".join(
            f"{g.name}: " + "; ".join(text for on, text in notes if on is g) for g in gpus)
        states.append(State(f"{c}", updates, {"annotations[0].text": note}))

    title = f"{model_name} decoding: tokens/s against batch, while weights + KV cache fit in memory"
    layout = {
        # the y axis's title is short enough to stay beside the plot (a long one ran up into the heading)
        **heading(title, caption([modelled(s) for s in gpus])), "height": 560,
        "margin": {"t": 95, "l": 70, "r": 30, "b": 205},
        "xaxis": {"type": "log", "title": "batch (sequences decoded together)", "dtick": 0.30103},
        "yaxis": {"type": "log", "title": {"text": "predicted tokens/s", "standoff": 8},
                  "exponentformat": "SI"},
        "annotations": [{"text": "", "xref": "paper", "yref": "paper", "x": 0, "y": 1.02, "xanchor": "left",
                         "yanchor": "bottom", "align": "left", "showarrow": False}],
        "legend": {"orientation": "h", "x": 0, "y": -0.18},
    }
    fig = with_slider(traces, states, prefix="context (tokens) = ", active=active, layout=layout)
    fig.layout.sliders[0].update(y=-0.36, pad={"t": 40})
    alt = (f"Predicted tokens per second of {model_name} decoding against the batch on the "
           f"{' and the '.join(s.name for s in gpus)}, with multi-head and grouped-query attention. Each line "
           "rises in proportion to the batch while the weights dominate the bytes read, then flattens as each "
           "sequence's KV cache takes over, and stops at the largest batch whose weights and cache fit in memory; "
           "a diamond marks the batch from which a step is math-bound. Moving the context slider lengthens the "
           "cache: the lines flatten earlier and stop sooner, and grouped-query attention keeps them rising longer.")
    return InteractiveFigure(fig, alt=alt, name="transformer-decode-roofline")


def _size(nbytes: float) -> str:
    """Bytes in MB or GB, three significant digits."""
    return f"{nbytes / 1e9:.3g} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:.3g} MB"


def attention_split(spec: str | DeviceSpec = "H100-SXM", *, dtype: Any = "bfloat16", batch: int = 1,
                    heads: int = 32, head_dim: int = 128, seqs: Sequence[int] = SEQS,
                    active: int | None = None) -> InteractiveFigure:
    """Predicted forward time of attention (no mask) on ``spec``: unfused, split into QKᵀ, softmax and
    PV, against one fused kernel, with a slider over ``seqs`` (s_q = s_k, tokens). ``active``: the
    opening length's index (default: the one nearest 8192)."""
    spec, dtype = resolve_spec(spec, none_ok=False), dtype_name("dtype", dtype)
    spec.peak_flop_s(dtype)  # LookupError naming the dtypes with a peak
    b, h, d = positive_int("batch", batch), positive_int("heads", heads), positive_int("head_dim", head_dim)
    lengths = distinct_ints("seqs", seqs, 2)
    active = slider_index(active, lengths, 8192)

    rows = ["unfused: 3 kernels", "fused: 1 kernel"]
    parts = (("QKᵀ", "#1f77b4"), ("softmax", "#d62728"), ("PV", "#2ca02c"), ("fused", "#9467bd"))
    traces = [go.Bar(orientation="h", y=rows, name=name if name != "fused" else "fused kernel",
                     marker={"color": colour}, textposition="inside", insidetextanchor="middle",
                     hovertemplate=f"{name}: %{{text}}<extra></extra>") for name, colour in parts]
    traces.append(go.Scatter(mode="text", y=rows, textposition="middle right", showlegend=False,
                             hoverinfo="skip"))
    states = []
    for s in lengths:
        t = attention_kernels(spec, s, batch=b, heads=h, head_dim=d, dtype=dtype)
        unfused = t["QKᵀ"] + t["softmax"] + t["PV"]
        bars = [{"x": rounded([t[n], 0] if n != "fused" else [0, t[n]]),
                 "text": [format_time(t[n]), ""] if n != "fused" else ["", format_time(t[n])]}
                for n, _ in parts]
        faster = f" ({unfused / t['fused']:.1f}× faster)"
        totals = {"x": rounded([unfused, t["fused"]]),
                  "text": [f" {format_time(unfused)}", f" {format_time(t['fused'])}{faster}"]}
        moved = [attention_bytes(b, h, s, s, d, dtype, fused=f) for f in (False, True)]
        scores = b * h * s * s * itemsize(dtype)
        note = (f"s = {s}: the {b * h} score matrices hold {_size(scores)}; unfused attention moves "
                f"{_size(moved[0])}, fused {_size(moved[1])} ({moved[0] / moved[1]:.0f}×).")
        if spec.memory_bytes and 2 * scores > spec.memory_bytes:
            note += (f"<br>Unfused, S and P ({_size(2 * scores)}) exceed the {spec.name}'s {_size(spec.memory_bytes)}"
                     ": the math path could not run at this length.")
        states.append(State(f"{s}", [*bars, totals],
                            {"annotations[0].text": note, "xaxis.range": [0, 1.45 * max(unfused, t["fused"])]}))

    title = f"Attention forward, {b} × {h} heads × d {d}, {dtype}: unfused kernels against one fused kernel"
    fig = bars_with_slider(traces, states, prefix="sequence length s = ", active=active,
                           head=heading(title, modelled(spec)), x_title="predicted forward time", height=408,
                           left=140)
    alt = (f"Horizontal bars of attention's predicted forward time on the {spec.name}: the unfused math path split "
           "into its QKᵀ GEMM, its softmax and its PV GEMM, against one fused kernel. Moving the sequence-length "
           "slider grows the score matrices with the square of the length: the softmax, which only reads and "
           "writes them, takes a growing share of the unfused time, while the fused kernel never writes them.")
    return InteractiveFigure(fig, alt=alt, name="transformer-attention-split")


#: name → a function that builds the figure with its defaults (the tests build each one).
FIGURES: dict[str, Callable[[], InteractiveFigure]] = {"decode_roofline": decode_roofline,
                                                       "attention_split": attention_split}
