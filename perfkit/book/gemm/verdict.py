"""The verdicts of chapter 02_gemm, computed from the frames the chapter shows.

``findings(frames)`` reads the GPU frames of the chapter's experiments (live or recorded; None
where nothing was measured) and Baidu DeepBench's published V100 GEMMs ("then"). Each rule's
*effect* is a number where larger means the rule matters more; the helpers below compute them
from any frame with the experiment's columns, so the chapter, the book-wide table and the tests
share one computation. Times are seconds.

Where nothing was measured, :func:`alternatives` gives each rule a published "now" (OpenXLA's
H100 GEMMs, DeepGEMM's H800 fp8 GEMMs) where one measures it, else the model's prediction for an
H100; ``findings(frames, instead=alternatives(modern_frames()))`` uses them.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import pandas as pd

from ...devices import DeviceSpec
from ...meta import FrameMeta
from ...published_data import published
from ...quantization import alignment, wave_quantization
from ...then_now import counterpart, layout_spread
from ...validation import with_predictions
from ..evidence import frame_of, from_model, from_published, modern, prefer, today, xla_rows
from ..frames import gpu_rows, is_cpu, recorded
from ...experiments.measure import predicted_s
from ..verdict import Band, Evidence, Finding, finding
from ..verdict import instead_of as _instead
from .experiments import alignment_penalty
from .published import deepgemm_dense
from .published import size_effect as published_size

TITLE = "Matrix multiplication"
CHAPTER = "02_gemm"

#: The chapter's GPU experiments, in the order of its sections (the keys of ``frames``).
EXPERIMENTS: tuple[str, ...] = ("gemm_sizes", "gemm_alignment", "gemm_tile_quantization", "gemm_waves",
                                "gemm_transposes", "gemm_small_n")
#: The key of the published GEMMs ("then") in ``frames``, and the GPU they come from.
PUBLISHED = "published"
THEN_GPU = "V100-SXM2"
#: Baidu's skinny shapes (M = K = 2560, minibatch N ≤ 128), measured in two layouts then and now.
SKINNY_MK, SKINNY_MAX_N = 2560, 128
#: The minibatches whose throughputs the small-N rule compares (8× the columns).
SMALL_N, LARGE_N = 16, 128
#: Work (FLOP) of a small and of a big GEMM, for "bigger GEMMs are more efficient".
SMALL_WORK, BIG_WORK = 1e9, 1e11


def frames() -> dict[str, pd.DataFrame | None]:
    """The recorded (never live, never CPU) GPU frames of :data:`EXPERIMENTS`, None where there is
    no recording, and DeepBench's published V100 GEMMs under :data:`PUBLISHED`."""
    out = recorded(EXPERIMENTS)
    try:
        out[PUBLISHED] = published("deepbench_gemm", THEN_GPU)
    except LookupError:
        out[PUBLISHED] = None
    return out


def _gpu_frame(frames: Mapping[str, pd.DataFrame | None], key: str) -> pd.DataFrame | None:
    """``frames[key]`` if it holds rows measured on a GPU; None if absent or empty.

    ``ValueError`` for a frame measured on a CPU or by a third party (published): neither is "now".
    """
    frame = gpu_rows(frames.get(key), f"frames[{key!r}]")
    if frame is None and frames.get(key) is not None and is_cpu(frames[key]):
        name = FrameMeta.of(frames[key]).device_name
        raise ValueError(f"frames[{key!r}] was measured on a CPU ({name}); a verdict "
                         "needs a GPU frame, live or recorded (pass None instead)")
    meta = FrameMeta.of(frame)
    if meta.published_by:
        raise ValueError(f"frames[{key!r}] comes from {meta.published_by}: published data is 'then' and "
                         f"goes under frames[{PUBLISHED!r}]")
    return frame


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def size_effect(frame: pd.DataFrame | None, dtype: str | None = None) -> float | None:
    """Bigger GEMMs: median TFLOP/s of the GEMMs with at least :data:`BIG_WORK` FLOP of work
    (2·M·N·K) ÷ that of those with at most :data:`SMALL_WORK`, in ``dtype`` (None: float16 if
    measured, else the smallest effect over the frame's dtypes). None without GEMMs of both kinds."""
    if frame is None or not len(frame):
        return None
    if dtype is None:
        dtypes = ["float16"] if "float16" in set(frame["dtype"]) else sorted(set(frame["dtype"]))
        effects = [e for e in (size_effect(frame, d) for d in dtypes) if e is not None]
        return min(effects) if effects else None
    rows = frame[frame["dtype"] == dtype]
    work = 2.0 * rows["M"] * rows["N"] * rows["K"]
    low = rows.loc[work <= SMALL_WORK, "tflops"].median()
    high = rows.loc[work >= BIG_WORK, "tflops"].median()
    return _finite(high / low) if low > 0 else None


def alignment_effect(frame: pd.DataFrame | None) -> float | None:
    """Alignment: the largest over dtypes of the median unaligned ÷ median aligned time
    (:func:`perfkit.book.gemm.experiments.alignment_penalty`); None without both kinds of K."""
    if frame is None or not len(frame) or frame["aligned"].nunique() < 2:
        return None
    penalty = alignment_penalty(frame)["penalty"].dropna()
    return _finite(penalty.max()) if len(penalty) else None


def published_alignment_effect(frame: pd.DataFrame | None, dtype: str = "float16") -> float | None:
    """Alignment in published GEMMs of many shapes: the median measured time ÷ the model's time
    for the shape padded to alignment (:func:`perfkit.validation.with_predictions`) of the
    unaligned shapes over that of the aligned ones. None without both kinds of shape in ``dtype``."""
    if frame is None or not len(frame):
        return None

    rows = frame[frame["dtype"] == dtype]
    a = alignment(dtype)
    aligned = (rows["M"] % a == 0) & (rows["N"] % a == 0) & (rows["K"] % a == 0)
    if aligned.all() or not aligned.any():
        return None
    # each shape against the model's time for it padded to alignment: the model's own alignment
    # penalty (fitted on such rows) must not divide the effect out
    padded = rows.assign(**{d: -(-rows[d] // a) * a for d in ("M", "N", "K")})
    ratio = rows["time_s"] / with_predictions(padded)["predicted_s"].to_numpy()
    return _finite(ratio[~aligned].median() / ratio[aligned].median())


def quantization_effect(frame: pd.DataFrame | None) -> float | None:
    """Tile or wave quantization in a forced-tile sweep over N (``waves`` per row): at each step
    from w to w + 1 waves, what the first N past the step costs, as a share of a whole extra wave:
    ``(t_after − t_before) / (t_end − t_before)`` with ``t_end`` the last N of w + 1 waves. The
    median over the steps whose wave w + 1 was swept to its end: 1.0 when a sliver of a wave costs
    the whole wave, about its share of the work without quantization. Triton rows only."""
    if frame is None or not len(frame):
        return None
    rows = frame
    if "impl" in rows:
        rows = rows[rows["impl"].astype(str).str.startswith("triton")]
    shares = []
    for _, g in rows.groupby(["M", "K", "dtype"], sort=False):
        g = g.sort_values("N")
        waves, t = g["waves"].to_numpy(), g["time_s"].to_numpy()
        for w in np.unique(waves):
            before, after = np.flatnonzero(waves == w), np.flatnonzero(waves == w + 1)
            if not len(before) or not len(after) or not (waves == w + 2).any():
                continue
            t0, t1, t2 = t[before[-1]], t[after[0]], t[after[-1]]
            if t2 > t0:
                shares.append((t1 - t0) / (t2 - t0))
    return _finite(float(np.median(shares))) if shares else None


def layout_effect(frame: pd.DataFrame | None, *, skinny: bool = False) -> float | None:
    """Layouts: the largest slowest ÷ fastest layout time of a shape (:func:`perfkit.then_now.layout_spread`);
    ``skinny`` keeps Baidu's skinny shapes only (M = K = 2560, N ≤ 128)."""
    if frame is None or not len(frame):
        return None
    if skinny:
        frame = frame[(frame["M"] == SKINNY_MK) & (frame["K"] == SKINNY_MK) & (frame["N"] <= SKINNY_MAX_N)]
    spread = layout_spread(frame) if len(frame) else frame
    return _finite(spread["spread"].max()) if len(spread) else None


def small_n_effect(frame: pd.DataFrame | None) -> float | None:
    """Small minibatch: throughput at N = 128 ÷ throughput at N = 16 (M and K fixed; fastest row
    of each), i.e. 8 × t(16) / t(128): 8 when the GEMM is memory-bound throughout, 1 when
    math-bound. None unless both N were measured."""
    if frame is None or not len(frame):
        return None
    t = frame.groupby("N")["time_s"].min()
    if SMALL_N not in t.index or LARGE_N not in t.index:
        return None
    return _finite(LARGE_N / SMALL_N * t[SMALL_N] / t[LARGE_N])


def _then(published: pd.DataFrame | None, experiment: str) -> pd.DataFrame | None:
    if published is None:
        return None
    rows = counterpart(experiment, published)
    return rows if len(rows) else None


#: The published tables of current GPUs the verdicts can rest on (see :func:`alternatives`).
MODERN: tuple[str, ...] = ("xla_h100_gemm", "deepgemm_fp8")
#: The keys of :func:`alternatives`, one per rule in the order of :func:`findings`.
RULES: tuple[str, ...] = ("alignment", "size", "tile", "waves", "layout", "small_n")
#: "A partial tile (wave) costs a full one": the cost of a sliver as a share of a full step, within ×2
#: of 1 either way (see :func:`findings`).
FULL_STEP = Band(1.0, holds_within=2.0, gone_beyond=4.0)
#: DeepGEMM's two smallest M (rows of tokens): throughput at the larger ÷ at the smaller is 2.0
#: where the GEMM is memory-bound throughout.
DEEPGEMM_SMALL_M = (64, 128)


def modern_frames() -> dict[str, pd.DataFrame | None]:
    """The published tables of :data:`MODERN` (None where the published-data folder lacks one)."""
    return modern(MODERN)


def deepgemm_small_m_gain(frame: pd.DataFrame | None) -> float | None:
    """DeepGEMM's dense fp8 GEMMs (:func:`perfkit.book.gemm.published.deepgemm_dense`, its
    latest README): median over its (N, K) of TFLOP/s at M = 128 ÷ at M = 64 (2.0: memory-bound,
    the time does not grow with M; 1.0: math-bound). None without both M."""

    dense = deepgemm_dense(frame) if frame is not None and len(frame) else None
    if dense is None or not len(dense):
        return None
    t = dense.pivot_table(index=["N", "K"], columns="M", values="tflops")
    small, large = DEEPGEMM_SMALL_M
    if small not in t.columns or large not in t.columns:
        return None
    return _finite((t[large] / t[small]).median())


def published_size_effect(xla: pd.DataFrame | None) -> float | None:
    """Bigger GEMMs in XLA's H100 table (one GEMM per launch): the smaller over bf16 and TF32 of
    :func:`perfkit.book.gemm.published.size_effect` (median TFLOP/s above 100 GFLOP ÷ below
    1 GFLOP). None without the rows."""

    effects = [published_size(xla, d) for d in ("bfloat16", "tf32")] if xla is not None else []
    effects = [e for e in effects if e is not None]
    return min(effects) if effects else None


def _model_rows(points, spec: DeviceSpec, dtype: str = "float16", tile=None, **columns) -> pd.DataFrame:
    """A frame of the model's times (``time_s``, ``tflops``) for GEMM ``points`` (M, N, K, extra dict)."""
    rows = []
    for M, N, K, extra in points:
        t = predicted_s(M, N, K, dtype, spec, tile)
        rows.append({"M": M, "N": N, "K": K, "dtype": dtype, "time_s": t, "tflops": 2.0 * M * N * K / t / 1e12,
                     **columns, **extra})
    return pd.DataFrame(rows)


def predicted_frames(spec: DeviceSpec) -> dict[str, pd.DataFrame]:
    """The model's version of each experiment of :data:`EXPERIMENTS` but the transposes (the model
    has no layout term) on ``spec``, with the experiments' GPU shapes, float16."""
    sizes = [256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384]
    tile = (256, 128)
    M_tiles = spec.sms * tile[0]
    a = max(d for d in range(1, 17) if spec.sms % d == 0)
    wave_n = range(64, int(round(3.3 * spec.sms / a)) * tile[1] + 1, 64)

    def waves(M: int, N: int) -> dict:
        return {"waves": wave_quantization(M, N, tile, spec.sms).waves}

    return {
        "gemm_sizes": _model_rows([(n, n, 4096, {}) for n in sizes] + [(4096, 4096, k, {}) for k in sizes], spec),
        "gemm_alignment": _model_rows([(4096, 4096, k, {"aligned": k % 8 == 0}) for k in range(4088, 4105)], spec),
        "gemm_tile_quantization": _model_rows([(M_tiles, n, 2048, waves(M_tiles, n))
                                               for n in range(64, 8 * tile[1] + 1, 16)], spec, tile=tile),
        "gemm_waves": _model_rows([(tile[0] * a, n, 4096, waves(tile[0] * a, n)) for n in wave_n], spec, tile=tile),
        "gemm_small_n": _model_rows([(SKINNY_MK, n, SKINNY_MK, {}) for n in
                                     (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256)], spec),
    }


def alternatives(published: Mapping[str, pd.DataFrame | None] | None,
                 spec: DeviceSpec | None = None) -> dict[str, Evidence | None]:
    """Each rule's "now" where nothing was measured (keys :data:`RULES`): a published measurement
    of a current GPU where one measures the rule, else the model's prediction for ``spec``
    (default: the H100 SXM). ``published`` maps the names of :data:`MODERN` to their frames (None
    or absent: not available, e.g. without the published-data folder)."""
    spec = today(spec)
    model = predicted_frames(spec)
    xla = xla_rows(frame_of(published, "xla_h100_gemm"))
    fp8 = frame_of(published, "deepgemm_fp8")
    small, large = DEEPGEMM_SMALL_M
    # Full memory-bound growth is 2× per doubling of M; the chapter's 8× rule (holds at 4×, gone
    # under 2×: 2/3 and 1/3 of the doublings) scaled to one doubling.
    one_doubling = dict(holds_at=2 ** (2 / 3), gone_below=2 ** (1 / 3))
    return {
        "alignment": from_model(alignment_effect(model["gemm_alignment"]), spec,
                                "unaligned ÷ aligned K around 4096"),
        "size": prefer(
            from_published(published_size_effect(xla), xla, "CUPTI kernel time; one GEMM per launch: median TFLOP/s above "
                           "100 GFLOP ÷ below 1 GFLOP, the smaller of bf16 and TF32"),
            from_model(size_effect(model["gemm_sizes"]), spec, "the chapter's size sweeps, float16")),
        "tile": from_model(quantization_effect(model["gemm_tile_quantization"]), spec,
                           "first 16 columns of a new tile column, forced 256×128 tiles"),
        "waves": from_model(quantization_effect(model["gemm_waves"]), spec,
                            "first 64 columns of a new wave, forced 256×128 tiles"),
        "layout": from_model(1.0, spec, "the model has no layout term: it prices every layout alike"),
        "small_n": prefer(
            from_published(deepgemm_small_m_gain(fp8), fp8, f"block-scaled fp8, DeepGEMM's kernels: TFLOP/s at M = {large} "
                           f"÷ at M = {small} tokens, median of 6 shapes (2.0 = memory-bound)",
                           **one_doubling),
            from_model(small_n_effect(model["gemm_small_n"]), spec, f"TFLOP/s at N = {LARGE_N} ÷ at N = {SMALL_N}, "
                       "M = K = 2560, float16")),
    }


def findings(frames: Mapping[str, pd.DataFrame | None], *,
             instead: Mapping[str, Evidence | None] | None = None) -> list[Finding]:
    """One Finding per rule of the chapter, from frames (None where not measured).

    ``frames`` maps each name of :data:`EXPERIMENTS` to its GPU frame (live or recorded) or None,
    and :data:`PUBLISHED` to DeepBench's V100 GEMMs (all dtypes) or None; missing keys count as
    None. ``instead`` (:func:`alternatives`) gives a published or predicted "now" to the rules
    nothing measured. Thresholds are explained beside each rule.
    """
    if not isinstance(frames, Mapping):
        raise TypeError(f"frames must be a mapping of experiment name → DataFrame or None, got "
                        f"{type(frames).__name__}")
    now = {name: _gpu_frame(frames, name) for name in EXPERIMENTS}
    published = frames.get(PUBLISHED)
    if published is not None and not isinstance(published, pd.DataFrame):
        raise TypeError(f"frames[{PUBLISHED!r}] must be a DataFrame or None, got {type(published).__name__}")
    alt = _instead(instead, RULES)
    return [
        # The old rule promised up to 6× (CUDA cores instead of Tensor Cores); 20 % is still worth
        # padding a dimension for, and under 5 % is within the spread of repeated timings.
        finding("Dimensions multiples of 8 (FP16) / 16 bytes", "NVIDIA, 2019–2023",
                "required for Tensor Cores before cuBLAS 11, faster after (unaligned ÷ aligned)",
                now=alignment_effect(now["gemm_alignment"]),
                then=published_alignment_effect(published), holds_at=1.2, gone_below=1.05,
                where="section 3", on=now["gemm_alignment"], instead=alt["alignment"]),
        # Twice the throughput for the big GEMMs is the chapter's own test of the rule; under 1.2×
        # the smallest GEMMs already fill the GPU.
        finding("Bigger GEMMs are more efficient", "NVIDIA, 2019–2023",
                "TFLOP/s rises with size (median TFLOP/s over 100 GFLOP ÷ under 1 GFLOP)",
                now=size_effect(now["gemm_sizes"]), then=size_effect(_then(published, "gemm_sizes")),
                holds_at=2.0, gone_below=1.2, fmt="{:.1f}×", where="section 2", on=now["gemm_sizes"],
                instead=alt["size"]),
        # Full quantization makes the first sliver past a step cost 100 % of a step; without it a
        # sliver costs its share of the work (13 % for 16 of 128 columns). Half is a step anyone sees;
        # under a quarter little of it is left. Two-sided ("costs a full one"): mirrored, a sliver
        # costing more than twice a full step is something other than quantization (50–200 %, gone
        # outside 25–400 %).
        finding("Tile quantization", "NVIDIA, 2020–2023",
                "a partly empty tile costs a full one (16 columns into a new tile column ÷ a full one)",
                now=quantization_effect(now["gemm_tile_quantization"]), band=FULL_STEP,
                fmt="{:.0%}", where="section 4", on=now["gemm_tile_quantization"], instead=alt["tile"]),
        finding("Wave quantization", "NVIDIA, 2020–2023",
                "a partial last wave costs a full one (64 columns into a new wave ÷ a full one)",
                now=quantization_effect(now["gemm_waves"]), band=FULL_STEP,
                fmt="{:.0%}", where="section 5", on=now["gemm_waves"], instead=alt["waves"]),
        # A layout that costs 30 % of a GEMM is worth a one-off transpose; under 10 % it is noise
        # (the median V100 shape's spread was 5 %).
        finding("Prefer NN over TN", "Baidu SVAIL, 2015",
                "the layout can cost a factor (slowest ÷ fastest layout; then: Baidu's skinny shapes)",
                now=layout_effect(now["gemm_transposes"]),
                then=layout_effect(_then(published, "gemm_transposes"), skinny=True),
                holds_at=1.3, gone_below=1.1, where="section 7", on=now["gemm_transposes"],
                instead=alt["layout"]),
        # 8× means throughput grows exactly with N (memory-bound); half of that still means
        # mostly memory-bound, under 2× the GEMM is mostly math-bound already.
        finding("Small minibatch is memory-bound", "Baidu SVAIL, 2015",
                f"throughput grows with N (TFLOP/s at N = {LARGE_N} ÷ N = {SMALL_N})",
                now=small_n_effect(now["gemm_small_n"]),
                then=small_n_effect(_then(published, "gemm_small_n")), holds_at=4.0, gone_below=2.0,
                fmt="{:.1f}×", where="section 8", on=now["gemm_small_n"], instead=alt["small_n"]),
    ]


__all__ = ["CHAPTER", "EXPERIMENTS", "MODERN", "PUBLISHED", "RULES", "THEN_GPU", "TITLE", "alignment_effect",
           "alternatives", "deepgemm_small_m_gain", "findings", "frames", "layout_effect", "modern_frames",
           "predicted_frames", "published_alignment_effect", "published_size_effect", "quantization_effect", "size_effect", "small_n_effect"]
