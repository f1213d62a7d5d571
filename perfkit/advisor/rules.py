"""The book's rules, applied to a model's ops. Each rule has a stable id (:data:`RULES`).

Every finding names the layer (its qualified name in ``model.named_modules()``, "" for the model
itself), what the rule saw, a concrete fix, and ``predicted_saving_s``: the seconds per step the
fix saves by perfkit's models on the chosen device. A fix that changes the work (a wider layer) is
priced as it is; a fix that changes the batch is priced per sample (the same work in fewer, fuller
steps). The saving can be zero or negative: the GEMM model charges tile edges and waves but not an
unaligned-kernel penalty unless this device's recording measured one (``gemm_alignment``), so an
alignment fix it does not price says so and is checked with ``measure=True``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..memory_model import CHAIN_KINDS, chain_bytes, memory_time
from ..quantization import alignment, pad_to_multiple
from ..roofline import math_bound_batch
from ..units import format_percent
from .ops import Op
from .price import Pricer

__all__ = ["MIN_SHARE", "QUANTIZATION_THRESHOLD", "RULES", "Context", "apply_rules"]

#: Rule id → what it checks (the guides' advice it applies).
RULES: dict[str, str] = {
    "alignment": "GEMM dimensions (features, channels, head size, tokens) a multiple of 16 bytes of the "
                 "dtype (8 in fp16/bf16), so Tensor Cores run their fastest kernels",
    "quantization": "a GEMM's tiles fill their waves: less than 75 % of the launched tile work useful",
    "memory_bound": "a GEMM whose intensity is below the device's ridge point, not because of the batch",
    "small_batch": "a layer whose batch (tokens per step) is below the one that makes it math-bound",
    "first_conv": "a first convolution on 3 colour channels: pad them to 4 (stride 2) or 8",
    "layout": "NCHW convolutions on Tensor Cores: use channels_last (NHWC)",
    "rnn_sizes": "recurrent hidden size a multiple of 32 (64, 256 for tiling), batch a multiple of 8",
    "fusion": "chains of memory-bound ops between GEMMs: fuse them into one kernel (torch.compile)",
}

#: A layer must take at least this share of the step for quantization or memory_bound to report it.
MIN_SHARE = 0.005

#: Useful fraction of the launched tile work below which ``quantization`` reports a GEMM layer.
QUANTIZATION_THRESHOLD = 0.75

#: Padding to the 128-byte multiple (NVIDIA's A100 advice) is proposed when it adds at most this much.
WIDE_PADDING = 0.01


@dataclass
class Context:
    """What every rule sees: the ops, their pricer, the step's predicted seconds and the batch."""

    ops: list[Op]
    pricer: Pricer
    step_s: float
    times: dict[int, float]  # op index → predicted seconds

    @property
    def dtype(self) -> str:
        return self.pricer.dtype


def _finding(op_or_layer: Any, rule: str, message: str, fix: str, saving: float, fixed: Op | None = None,
             per_work: float = 1.0) -> dict[str, Any]:
    """A finding; ``fixed`` (the op with the fix applied, priced per ``per_work``) lets it be re-measured."""
    op = op_or_layer if isinstance(op_or_layer, Op) else None
    return {"layer": op.layer if op else op_or_layer, "rule": rule, "message": message, "fix": fix,
            "predicted_saving_s": saving, "_op": op, "_fixed": fixed, "_per_work": per_work}


def _padded(d: int, dtype: str) -> int:
    wide = pad_to_multiple(d, alignment(dtype, 128))
    return wide if wide - d <= WIDE_PADDING * d else pad_to_multiple(d, alignment(dtype))


def _multiple(d: int, dtype: str) -> int:
    """The multiple :func:`_padded` padded to: 128 bytes of ``dtype`` or 16 bytes."""
    wide = alignment(dtype, 128)
    return wide if d % wide == 0 else alignment(dtype)


def _ref(layer: str) -> str:
    """Python that reaches the module named ``layer`` from ``model``: ``model.blocks[0].attn``."""
    return "model" + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in layer.split(".")) if layer else "model"


def _saving(ctx: Context, op: Op, fixed: Op, per_work: float = 1.0) -> float:
    return ctx.times[op.index] - ctx.pricer.time_s(fixed) * per_work


def _untested(saving: float) -> str:
    if saving > 0:
        return ""
    return (" The model predicts no saving: it charges tile edges, not the slower kernels a library may "
            "pick for unaligned sizes; measure=True times both.")


def _alignment(ctx: Context) -> Iterable[dict]:
    a = alignment(ctx.dtype)
    dims = {"linear": ("in_features", "out_features"), "conv": ("C", "K"), "attention": ("E", "Ev")}
    names = {"in_features": "in_features", "out_features": "out_features", "C": "input channels",
             "K": "output channels", "E": "head size", "Ev": "value head size"}
    for op in ctx.ops:
        if op.op not in dims or (op.op == "conv" and op.params["groups"] != 1):
            continue
        bad = {k: op.params[k] for k in dims[op.op] if op.params[k] % a}
        if op.op == "conv" and op.params["C"] < a:
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
        saving = _saving(ctx, op, fixed)
        mult = {k: _multiple(v, ctx.dtype) for k, v in new.items()}
        change = ", ".join(f"{names[k]} {v} → {new[k]} (×{mult[k]})" for k, v in bad.items())
        if op.op == "linear":
            tool = f"pk.padded_linear({_ref(op.layer)}, multiple={max(mult.values())})"
        elif op.op == "conv":
            tool = (f"pk.padded_conv2d({_ref(op.layer)}, in_multiple={mult.get('C', 1)}, "
                    f"out_multiple={mult.get('K', 1)})")
        else:
            tool = "choose a head size that is a multiple of 8 (64 or 128 are common)"
        listed = " and ".join(f"{names[k]} = {v}" for k, v in bad.items())
        msg = f"{listed} {'are not multiples' if len(bad) > 1 else 'is not a multiple'} of {a} ({ctx.dtype}: 16 bytes)."
        yield _finding(op, "alignment", msg + _untested(saving), f"pad {change}: {tool}", saving, fixed)
    tokens = [op for op in ctx.ops if op.op == "linear" and op.params["tokens"] % a]
    if tokens:
        n = tokens[0].params["tokens"]
        target = pad_to_multiple(n, a)
        saving = sum(_saving(ctx, op, op.with_params(tokens=pad_to_multiple(op.params["tokens"], a)),
                             op.params["tokens"] / pad_to_multiple(op.params["tokens"], a)) for op in tokens)
        yield _finding("", "alignment", f"{n} tokens per step (batch × sequence) is not a multiple of {a}, "
                       f"in {len(tokens)} linear layers." + _untested(saving),
                       f"make batch × sequence a multiple of {a} (e.g. {target} tokens)", saving)


def _efficiency(ctx: Context, op: Op) -> tuple[float, dict]:
    rows = [r for r in ctx.pricer.rows(op) if "wave_utilization" in r]  # the GEMMs, not the transposes
    total = sum(r["predicted_s"] for r in rows)
    eff = sum(r["predicted_s"] * r["wave_utilization"] * r["tile_efficiency"] for r in rows) / total
    return eff, max(rows, key=lambda r: r["predicted_s"])


def _quantization(ctx: Context) -> Iterable[dict]:
    own = {"linear": "out_features", "conv": "K", "rnn": "hidden"}
    names = {"out_features": "out_features", "K": "output channels", "hidden": "hidden size"}
    for op in ctx.ops:
        if not op.is_gemm or ctx.times[op.index] < MIN_SHARE * ctx.step_s:
            continue
        eff, worst = _efficiency(ctx, op)
        if eff >= QUANTIZATION_THRESHOLD:
            continue
        msg = (f"{format_percent(eff)} of the tile work it launches is useful on {ctx.pricer.spec.name} "
               f"({worst['pass']}: {worst['tiles']} tiles of {worst['tile']} in {worst['waves']} waves of "
               f"{ctx.pricer.spec.sms}).")
        key = own.get(op.op)
        best = None
        if key is not None:
            d = op.params[key]
            per_unit = ctx.times[op.index] / d
            for cand in range(max(64, (int(d * 0.85) // 64) * 64), int(d * 1.15) + 1, 64):
                t = ctx.pricer.time_s(op.with_params(**{key: cand})) / cand
                if t < per_unit * 0.98 and (best is None or t < best[1]):
                    best = (cand, t)
        if best is None:
            yield _finding(op, "quantization", msg, "no nearby size of this layer fills the waves better; the "
                           "batch (tokens) sets the other dimension: see the GEMM chapter's wave experiment",
                           math.nan)
            continue
        cand, t = best
        saving = ctx.times[op.index] - t * op.params[key]
        yield _finding(op, "quantization", msg, f"{names[key]} {op.params[key]} → {cand} fills the waves better: "
                       f"{format_percent(1 - t * op.params[key] / ctx.times[op.index])} less time for the same "
                       "work", saving, op.with_params(**{key: cand}), op.params[key] / cand)


def _small_batch_of(ctx: Context, op: Op) -> tuple[str, int, int] | None:
    """(parameter, value, math-bound value) when ``op`` is memory-bound because of its batch."""
    if op.op == "linear":
        n, star = op.params["tokens"], math_bound_batch(op.params["in_features"], op.params["out_features"],
                                                       ctx.pricer.spec, ctx.dtype)
        key = "tokens"
    elif op.op == "rnn":
        H = op.params["hidden"]
        n, star, key = op.params["batch"], math_bound_batch(H, H * (4 if op.params["cell"] == "lstm" else
                                                             3 if op.params["cell"] == "gru" else 1),
                                                             ctx.pricer.spec, ctx.dtype), "batch"
    else:
        return None
    return (key, n, star) if star is not None and n < star else None


def _small_batch(ctx: Context) -> Iterable[dict]:
    for op in ctx.ops:
        hit = _small_batch_of(ctx, op)
        if hit is None:
            continue
        key, n, star = hit
        fixed = op.with_params(**{key: star})
        saving = _saving(ctx, op, fixed, n / star)
        what = ("rows per step (batch × positions: the GEMM's N)" if key == "tokens" else
                "sequences per step (the recurrent GEMM's N)")
        yield _finding(op, "small_batch", f"{n} {what}: below the {star} at which this layer turns math-bound on "
                       f"{ctx.pricer.spec.name} in {ctx.dtype}, so its weights are read for only {n} columns.",
                       f"raise the {'rows (batch × positions)' if key == 'tokens' else 'batch'} to at least {star} "
                       "per step", saving, fixed, n / star)


def _memory_bound(ctx: Context) -> Iterable[dict]:
    for op in ctx.ops:
        if not op.is_gemm or op.op == "attention" or _small_batch_of(ctx, op) is not None:
            continue
        if op.op == "conv" and op.params["C"] < alignment(ctx.dtype):
            continue  # a first layer: the first_conv rule
        if ctx.times[op.index] < MIN_SHARE * ctx.step_s:
            continue
        rows = [r for r in ctx.pricer.rows(op) if r["pass"] == "forward" and "wave_utilization" in r]
        ridge = ctx.pricer.spec.ops_per_byte(ctx.dtype)
        if not rows or rows[0]["intensity"] >= ridge:
            continue
        fix = ("a depthwise or grouped convolution moves more bytes than it computes: fuse it with its neighbours "
               "(torch.compile) or use fewer, wider groups" if op.op == "conv" and op.params["groups"] > 1 else
               "use F.scaled_dot_product_attention, whose fused kernel never writes the scores"
               if op.op == "matmul" and op.params["batch"] > 1 else
               "give it more work per weight: a larger batch, or fuse it with its neighbours")
        yield _finding(op, "memory_bound", f"{rows[0]['intensity']:.0f} FLOP/B, below the ridge point of "
                       f"{ridge:.0f} FLOP/B of {ctx.pricer.spec.name} in {ctx.dtype}: memory-bound.", fix, math.nan)


def _first_conv(ctx: Context) -> Iterable[dict]:
    a = alignment(ctx.dtype)
    for op in ctx.ops:
        if op.op != "conv" or op.params["C"] >= a or op.params["groups"] != 1:
            continue
        stride = op.params["stride"]
        strided = min(stride) >= 2 if isinstance(stride, (tuple, list)) else stride >= 2
        C = op.params["C"]
        target = 4 if strided and C < 4 else a
        fixed = op.with_params(C=target)
        saving = _saving(ctx, op, fixed)
        yield _finding(op, "first_conv", f"a convolution on {C} input channels: Tensor Core kernels want "
                       f"{'4 (with stride 2) or ' if strided else ''}{a}." + _untested(saving),
                       f"pad the input channels {C} → {target}: pk.padded_conv2d({_ref(op.layer)}, "
                       f"in_multiple={target}), and pad the images once in the data pipeline "
                       "(PaddedConv2d.pad_input)", saving, fixed)


def _layout(ctx: Context) -> Iterable[dict]:
    for op in ctx.ops:
        if not ctx.pricer.transposes(op):
            continue
        fixed = op.with_params(nhwc=True)
        yield _finding(op, "layout", "NCHW: Tensor Core convolutions work in NHWC, so the input and output are "
                       "transposed around it, forward and backward.",
                       "model.to(memory_format=torch.channels_last) and the same for the inputs",
                       _saving(ctx, op, fixed), fixed)


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
            saving = _saving(ctx, op, fixed)
            yield _finding(op, "rnn_sizes", f"hidden size {H} is not a multiple of 32 (Baidu measured over 4× lost "
                           "with 2015 cuBLAS; NVIDIA asks for 64, and 256 for tiling)." + _untested(saving),
                           f"hidden {H} → {target}", saving, fixed)
        if B % 8:
            target = pad_to_multiple(B, 8)
            fixed = op.with_params(batch=target)
            saving = _saving(ctx, op, fixed, B / target)
            yield _finding(op, "rnn_sizes", f"batch {B} is not a multiple of 8." + _untested(saving),
                           f"batch {B} → {target}", saving, fixed, B / target)


def _common_layer(layers: list[str]) -> str:
    parts = [name.split(".") for name in layers]
    common = []
    for level in zip(*parts):
        if len(set(level)) > 1:
            break
        common.append(level[0])
    return ".".join(common)


def _fusion(ctx: Context) -> Iterable[dict]:
    chain: list[Op] = []
    for op in [*ctx.ops, None]:
        keeps = op is not None and op.op in CHAIN_KINDS and (
            op.op != "elementwise" or op.params["read_elements"] >= math.prod(op.params["shape"]))
        if keeps and (not chain or op.params["shape"] == chain[0].params["shape"]):
            chain.append(op)
            continue
        if len(chain) >= 2:
            kinds = [(o.op, {k: v for k, v in o.params.items() if k != "shape"}) for o in chain]
            shape = chain[0].params["shape"]
            fused = memory_time(chain_bytes(kinds, shape, ctx.dtype, fused=True), ctx.pricer.spec,
                                ceilings=ctx.pricer.ceilings)
            eager = sum(ctx.pricer.rows(o)[0]["predicted_s"] for o in chain)
            names = " → ".join(o.name or o.op for o in chain)
            yield _finding(_common_layer([o.layer for o in chain]), "fusion",
                           f"{len(chain)} memory-bound ops in a row ({names}) each read and write the whole tensor "
                           f"{tuple(shape)}.", "fuse them: torch.compile(model) makes one kernel of such chains "
                           "(forward saving shown)", eager - fused)
        chain = [op] if keeps else []


_RULE_FUNCTIONS: dict[str, Callable[[Context], Iterable[dict]]] = {
    "alignment": _alignment, "quantization": _quantization, "memory_bound": _memory_bound,
    "small_batch": _small_batch, "first_conv": _first_conv, "layout": _layout, "rnn_sizes": _rnn_sizes,
    "fusion": _fusion,
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
