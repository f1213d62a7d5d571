"""The book's rules, applied to a model's ops. Each rule has a stable id (:data:`RULES`).

Every finding names the layer (its qualified name in ``model.named_modules()``, "" for the model
itself), what the rule saw, a concrete fix, and ``predicted_saving_s``: the seconds per step the
fix saves by perfkit's models on the chosen device. **One rule per cause**: only ``small_batch``
prices a larger batch (per sample: the same work in fewer, fuller steps); ``alignment``,
``quantization`` and ``rnn_sizes`` compare at the same batch, so padding a batch is charged its extra
rows. A fix is proposed only where it can be applied: a width shared with a residual stream, or a
weight tied to another layer's, is not resized alone (:mod:`.dataflow`); a grouped convolution gets
channel counts its groups divide. The saving can be zero or negative: the GEMM model charges tile
edges and waves but not an unaligned-kernel penalty unless this device's recording measured one
(``gemm_alignment``), so an alignment fix it does not price says so and is checked with
``measure=True``. The rules about bytes (``memory_bound``, ``fusion``) are in :mod:`.memory_rules`.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from ..dtypes import itemsize
from ..quantization import alignment, pad_to_multiple
from ..units import format_percent
from .context import MIN_SHARE, Context, finding, matrix_cores, ref, small_batch_of
from .memory_rules import fusion, memory_bound
from .ops import Op

__all__ = ["MIN_SHARE", "QUANTIZATION_THRESHOLD", "RULES", "Context", "apply_rules", "severity"]

#: Rule id → what it checks (the guides' advice it applies).
RULES: dict[str, str] = {
    "alignment": "GEMM dimensions (features, channels, head size, tokens) a multiple of 16 bytes of the "
                 "dtype (8 in fp16/bf16), so Tensor Cores run their fastest kernels",
    "quantization": "a GEMM's tiles fill their waves: less than 75 % of the launched tile work useful",
    "memory_bound": "an op whose time is set by bytes: a GEMM below the ridge point (named with the dimension "
                    "that limits it), a norm, an activation or an elementwise op",
    "small_batch": "a layer whose batch (tokens per step) is below the one that makes it math-bound",
    "first_conv": "a first convolution on 3 colour channels: pad them to 4 (stride 2) or 8",
    "layout": "NCHW convolutions on Tensor Cores: use channels_last (NHWC)",
    "rnn_sizes": "recurrent hidden size a multiple of 32 (64, 256 for tiling), batch a multiple of 8",
    "fusion": "chains of memory-bound ops between GEMMs: fuse them into one kernel (torch.compile)",
}

#: Useful fraction of the launched tile work below which ``quantization`` reports a GEMM layer.
QUANTIZATION_THRESHOLD = 0.75

#: Padding to the 128-byte multiple (NVIDIA's A100 advice) is proposed when it adds at most this much.
WIDE_PADDING = 0.01


def _padded(d: int, dtype: str) -> int:
    wide = pad_to_multiple(d, alignment(dtype, 128))
    return wide if wide - d <= WIDE_PADDING * d else pad_to_multiple(d, alignment(dtype))


def _multiple(d: int, dtype: str) -> int:
    """The multiple :func:`_padded` padded to: 128 bytes of ``dtype`` or 16 bytes."""
    wide = alignment(dtype, 128)
    return wide if d % wide == 0 else alignment(dtype)


def _aligned_bytes(dtype: str) -> str:
    """The bytes of :func:`~perfkit.quantization.alignment`'s multiple, in words: "16 bytes", or for float6
    (0.75 bytes an element) the first whole number of elements that fills a multiple of 16 bytes."""
    nbytes = alignment(dtype) * itemsize(dtype)
    if nbytes == 16:
        return "16 bytes"
    return f"{nbytes:g} bytes: the fewest whole elements that fill a multiple of 16 bytes"


def _untested(saving: float) -> str:
    if saving > 0:
        return ""
    return (" The model predicts no saving: it charges tile edges, not the slower kernels a library may "
            "pick for unaligned sizes; measure=True times both.")


def _tool(ctx: Context, op: Op, new: dict, mult: dict) -> str:
    """The code that applies an alignment fix to ``op``, or words where perfkit has no tool for it."""
    if op.op == "linear" and op.layer in ctx.tied and "out_features" in new:
        others = ", ".join(ctx.tied[op.layer])
        return (f"its weight is tied to {others}'s, so pad both: a vocabulary of {new['out_features']} (in "
                f"transformers, model.resize_token_embeddings({new['out_features']}); in your own model, its "
                "vocab_size). pk.padded_linear would copy the weight and untie them")
    if op.op == "linear" and ctx.paddable.get(op.layer) == "linear":
        return f"pk.padded_linear({ref(op.layer)}, multiple={max(mult.values())})"
    if op.op == "linear":
        return f"change it where the model is defined (perfkit pads nn.Linear layers; this is a {op.module})"
    if op.op == "conv" and ctx.paddable.get(op.layer) == "conv2d" and op.params["groups"] == 1:
        return (f"pk.padded_conv2d({ref(op.layer)}, in_multiple={mult.get('C', 1)}, "
                f"out_multiple={mult.get('K', 1)})")
    if op.op == "conv":
        return (f"change them where the model is defined (perfkit pads nn.Linear and nn.Conv2d layers; this is "
                f"a {op.module})")
    return "choose a head size that is a multiple of 8 (64 or 128 are common)"


def _alignment(ctx: Context) -> Iterable[dict]:
    a = alignment(ctx.dtype)
    dims = {"linear": ("in_features", "out_features"), "conv": ("C", "K"), "attention": ("E", "Ev")}
    names = {"in_features": "in_features", "out_features": "out_features", "C": "input channels",
             "K": "output channels", "E": "head size", "Ev": "value head size"}
    for op in ctx.ops:
        if op.op not in dims or (op.op == "conv" and op.params["groups"] != 1):
            continue
        bad = {k: op.params[k] for k in dims[op.op] if op.params[k] % a}
        if op.op == "conv" and op.params["C"] < a and op.params.get("reads_input"):
            bad.pop("C", None)  # the first_conv rule
        same_v = op.op == "attention" and op.params["E"] == op.params["Ev"]
        if same_v:
            bad.pop("Ev", None)
        if not bad:
            continue
        new = {k: _padded(v, ctx.dtype) for k, v in bad.items()}
        if same_v:
            new["Ev"] = new["E"]
        fixed = op.with_params(**new)
        saving = ctx.saving(op, fixed)
        mult = {k: _multiple(v, ctx.dtype) for k, v in new.items()}
        change = ", ".join(f"{names[k]} {v} → {new[k]} (×{mult[k]})" for k, v in bad.items())
        listed = " and ".join(f"{names[k]} = {v}" for k, v in bad.items())
        msg = (f"{listed} {'are not multiples' if len(bad) > 1 else 'is not a multiple'} of {a} "
               f"({ctx.dtype}: {_aligned_bytes(ctx.dtype)}).")
        yield finding(op, "alignment", msg + _untested(saving), f"pad {change}: {_tool(ctx, op, new, mult)}",
                      saving, fixed)
    # one finding per row count (a ViT's blocks see batch × 197 rows, its head the batch); a batch below the
    # multiple runs as a matrix-vector product: padding it would only add rows
    rows: dict[int, list[Op]] = {}
    for op in ctx.ops:
        n = op.params.get("tokens", 0) if op.op == "linear" else 0
        if n % a and n > a:
            rows.setdefault(n, []).append(op)
    for n, ops in rows.items():
        target = pad_to_multiple(n, a)
        saving = sum(ctx.saving(op, op.with_params(tokens=target)) for op in ops)
        yield finding("", "alignment", f"{n} rows per step (batch × positions) is not a multiple of {a}, in "
                      f"{len(ops)} linear layer{'s' if len(ops) > 1 else ''} (priced at the same batch: the padded "
                      "rows are extra work)." + _untested(saving), f"make the rows per step a multiple of {a} "
                      f"(e.g. {target}), through the batch or the sequence length", saving)


def _efficiency(ctx: Context, op: Op) -> tuple[float, dict] | None:
    rows = [r for r in ctx.pricer.rows(op) if r.get("tiles")]  # the GEMMs, not transposes or direct kernels
    if not rows:
        return None
    total = sum(r["predicted_s"] for r in rows)
    eff = sum(r["predicted_s"] * r["wave_utilization"] * r["tile_efficiency"] for r in rows) / total
    return eff, max(rows, key=lambda r: r["predicted_s"])


def _candidates(op: Op, d: int, dtype: str) -> range:
    """Sizes near ``d`` a fix may propose: multiples of 64, or for a grouped convolution multiples of its
    groups (and of 16 bytes), so that every group keeps a whole number of channels."""
    step = 64 if op.op != "conv" or op.params["groups"] == 1 else math.lcm(op.params["groups"], alignment(dtype))
    return range(max(step, math.ceil(d * 0.85 / step) * step), int(d * 1.15) + 1, step)


def _quantization(ctx: Context) -> Iterable[dict]:
    own = {"linear": "out_features", "conv": "K", "rnn": "hidden"}
    names = {"out_features": "out_features", "K": "output channels", "hidden": "hidden size"}
    for op in ctx.ops:
        if not op.is_gemm or not ctx.large(op) or ctx.pricer.direct(op):
            continue
        hit = _efficiency(ctx, op)
        if hit is None or hit[0] >= QUANTIZATION_THRESHOLD:
            continue
        eff, worst = hit
        msg = (f"{format_percent(eff)} of the tile work it launches is useful on {ctx.pricer.spec.name} "
               f"({worst['pass']}: {worst['tiles']} tiles of {worst['tile']} in {worst['waves']} waves of "
               f"{ctx.pricer.spec.sms} {ctx.pricer.spec.unit_name}).")
        key = own.get(op.op)
        if key is not None and op.index in ctx.shared:
            yield finding(op, "quantization", msg, f"its {names[key]} ({op.params[key]}) is a width other layers "
                          "share (a residual stream, or attention's embedding size): change it for the whole model "
                          "or not at all; the batch (tokens) sets the other dimension")
            continue
        best = None
        if key is not None:
            d = op.params[key]
            per_unit = ctx.times[op.index] / d
            for cand in _candidates(op, d, ctx.dtype):
                t = ctx.pricer.time_s(op.with_params(**{key: cand})) / cand
                if t < per_unit * 0.98 and (best is None or t < best[1]):
                    best = (cand, t)
        if best is None:
            yield finding(op, "quantization", msg, "no nearby size of this layer fills the waves better; the "
                          "batch (tokens) sets the other dimension: see the GEMM chapter's wave experiment")
            continue
        cand, t = best
        yield finding(op, "quantization", msg, f"{names[key]} {op.params[key]} → {cand} fills the waves better: "
                      f"{format_percent(1 - t * op.params[key] / ctx.times[op.index])} less time for the same "
                      "work", ctx.times[op.index] - t * op.params[key], op.with_params(**{key: cand}),
                      op.params[key] / cand)


def _small_batch(ctx: Context) -> Iterable[dict]:
    for op in ctx.ops:
        hit = small_batch_of(ctx, op)
        if hit is None:
            continue
        key, n, star = hit
        fixed = op.with_params(**{key: star})
        what = ("rows per step (batch × positions: the GEMM's N)" if key == "tokens" else
                "sequences per step (the recurrent GEMM's N)")
        yield finding(op, "small_batch", f"{n} {what}: below the {star} at which this layer turns math-bound on "
                      f"{ctx.pricer.spec.name} in {ctx.dtype}, so its weights are read for only {n} columns.",
                      f"raise the {'rows (batch × positions)' if key == 'tokens' else 'batch'} to at least {star} "
                      "per step", ctx.saving(op, fixed, n / star), fixed, n / star)


def _first_conv(ctx: Context) -> Iterable[dict]:
    a = alignment(ctx.dtype)
    for op in ctx.ops:
        p = op.params
        if (op.op != "conv" or p["C"] >= a or p["groups"] != 1 or p["dims"] != 2
                or not p.get("reads_input")):
            continue  # a Conv1d has no padded layer in perfkit; a narrow conv inside the model is alignment's
        stride = tuple(p["stride"]) if isinstance(p["stride"], (tuple, list)) else (p["stride"],) * 2
        strided = stride == (2, 2)  # NVIDIA: 4 channels suffice "if a stride of 2 is used"
        C = p["C"]
        target = 4 if strided and C < 4 else a
        fixed = op.with_params(C=target)
        saving = ctx.saving(op, fixed)
        yield finding(op, "first_conv", f"a convolution on {C} input channels: {matrix_cores(ctx.pricer.spec)} kernels want "
                      f"{'4 (with stride 2) or ' if strided else ''}{a}." + _untested(saving),
                      f"pad the input channels {C} → {target}: " + (
                          f"pk.padded_conv2d({ref(op.layer)}, in_multiple={target}), and pad the images once in "
                          "the data pipeline (PaddedConv2d.pad_input)" if ctx.paddable.get(op.layer) == "conv2d"
                          else f"a zero channel in the data pipeline and in this {op.module}'s weights"),
                      saving, fixed)


def _layout(ctx: Context) -> Iterable[dict]:
    for op in ctx.ops:
        if not ctx.pricer.transposes(op):
            continue
        fixed = op.with_params(nhwc=True)
        yield finding(op, "layout", f"NCHW: {matrix_cores(ctx.pricer.spec)} convolutions work in NHWC, so the "
                      "input and output are transposed around it, forward and backward.",
                      "model.to(memory_format=torch.channels_last) and the same for the inputs",
                      ctx.saving(op, fixed), fixed)


def _hidden_target(H: int) -> int:
    for m in (256, 64, 32):
        t = pad_to_multiple(H, m)
        if t - H <= 0.05 * H:
            return t
    return pad_to_multiple(H, 32)


def _rnn_sizes(ctx: Context) -> Iterable[dict]:
    for op in ctx.ops:
        if op.op != "rnn":
            continue
        H, B = op.params["hidden"], op.params["batch"]
        if H % 32:
            target = _hidden_target(H)
            fixed = op.with_params(hidden=target)
            saving = ctx.saving(op, fixed)
            yield finding(op, "rnn_sizes", f"hidden size {H} is not a multiple of 32 (Baidu measured over 4× lost "
                          "with 2015 cuBLAS; NVIDIA asks for 64, and 256 for tiling)." + _untested(saving),
                          f"hidden {H} → {target}", saving, fixed)
        if B % 8:
            target = pad_to_multiple(B, 8)
            fixed = op.with_params(batch=target)
            saving = ctx.saving(op, fixed)  # at the same batch: the padded sequences are extra work
            yield finding(op, "rnn_sizes", f"batch {B} is not a multiple of 8 (priced at the same batch: the "
                          "padded sequences are extra work)." + _untested(saving), f"batch {B} → {target}",
                          saving, fixed)


_RULE_FUNCTIONS: dict[str, Callable[[Context], Iterable[dict]]] = {
    "alignment": _alignment, "quantization": _quantization, "memory_bound": memory_bound,
    "small_batch": _small_batch, "first_conv": _first_conv, "layout": _layout, "rnn_sizes": _rnn_sizes,
    "fusion": fusion,
}


def severity(saving_s: float, step_s: float) -> str:
    """``high`` (saves ≥ 5 % of the step), ``medium`` (≥ 1 %), ``low`` (less), ``info`` (no saving priced)."""
    if not math.isfinite(saving_s) or saving_s <= 0:
        return "info"
    share = saving_s / step_s
    return "high" if share >= 0.05 else "medium" if share >= 0.01 else "low"


def apply_rules(ctx: Context, rules: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Every finding of ``rules`` (default: all of :data:`RULES`), each with its severity."""
    out = []
    for rule in RULES if rules is None else rules:
        for f in _RULE_FUNCTIONS[rule](ctx):
            out.append({**f, "severity": severity(f["predicted_saving_s"], ctx.step_s)})
    return out
