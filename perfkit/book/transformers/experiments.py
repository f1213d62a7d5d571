"""Attention experiments: PyTorch's attention backends against the sequence length and the head
dimension (each output checked against the math backend's first); the decoding step is in
:mod:`perfkit.book.transformers.decoding`. Rows hold the model's FLOPs and bytes (:mod:`perfkit.transformer`),
``time_s`` (median seconds) and ``predicted_s`` (the model on the measured GPU; NaN on a CPU).
GPU sweeps run bfloat16; CPU runs float32, small, one thread, seconds.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any, Callable

import pandas as pd

from ..._validate import boolean, dtype_name, one_of, positive_int, sequence_of
from ...devices import DeviceSpec
from ...display import Note, show
from ...dtypes import itemsize, torch_dtype
from ...matmul import seeded_on
from ...placement import ensure_fits, lean_bench, resolve_device
from ...transformer import attention_bytes, attention_flops, predict_attention_time
from ...experiments.measure import measured_spec, sweep, timing_row
from ...experiments.registry import register

__all__ = ["ATTENTION_BACKENDS", "ATTENTION_COLUMNS", "ATTENTION_DTYPES", "CPU_BACKENDS", "TOLERANCE",
           "attention_backends", "attention_head_dims"]

#: PyTorch's SDPA backends by name (``torch.nn.attention.SDPBackend``): "math" is unfused (it writes the
#: s×s scores); "flash" (FLASH_ATTENTION), "efficient" (EFFICIENT_ATTENTION) and "cudnn" are fused.
ATTENTION_BACKENDS: tuple[str, ...] = ("math", "flash", "efficient", "cudnn")
#: The backends torch has on a CPU (asking a CPU for another is refused).
CPU_BACKENDS: tuple[str, ...] = ("math", "flash")
#: Storage dtypes the experiments accept (a CPU always runs float32).
ATTENTION_DTYPES: tuple[str, ...] = ("bfloat16", "float16", "float32")
#: Largest |output − math backend's output| accepted, by dtype (inputs ~N(0, 1)).
TOLERANCE: dict[str, float] = {"float32": 1e-3, "bfloat16": 5e-2, "float16": 5e-2}

_SDP = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION"}
_GPU_SEQS, _QUICK_SEQS, _CPU_SEQS = (512, 1024, 2048, 4096, 8192, 16384), (512, 2048), (128, 256, 512, 1024)
_MATH_MAX_SEQ = 8192  # default sweeps stop the math backend here: its scores at 16384 are 17 GB per copy
_GPU_DIMS, _QUICK_DIMS, _CPU_DIMS = (64, 80, 96, 128, 256), (64, 80, 128), (64, 80, 96, 128)
_REFERENCE_BYTES = 1 << 31  # the math reference runs on chunks of heads whose scores take at most this
_PROBE_SEQ = 128  # tokens of the tiny call that asks whether a backend runs here

TIMING_COLUMNS = dict(time_s="median duration, seconds", iqr_s="inter-quartile range of the samples, seconds")
ATTENTION_COLUMNS: dict[str, str] = dict(
    backend="SDPA backend: 'math' (unfused), 'flash', 'efficient' or 'cudnn' (fused)", batch="sequences (b)",
    heads="query heads (h)", seq="sequence length, s_q = s_k, tokens", head_dim="head dimension (d)",
    causal="True: a causal mask (is_causal=True)", dtype="storage dtype of Q, K, V and O",
    flops="pk.attention_flops with the mask: the FLOPs a causal mask needs, FLOP",
    bytes_fused="pk.attention_bytes, fused=True: Q, K, V read and O written once, bytes",
    bytes_unfused="pk.attention_bytes, fused=False: the scores written and read too, bytes", **TIMING_COLUMNS,
    tflops="flops / time_s, 1e12 FLOP/s",
    peak_bytes="bytes one call allocated beyond its inputs (CUDA peak − allocated before); NaN on a CPU",
    max_abs_diff="largest |output − the math backend's output| on the same inputs (0 for math itself); "
                 "NaN on a pretend GPU",
    predicted_s="pk.predict_attention_time on the measured GPU (fused unless math), seconds; NaN on a CPU")
def setup(device: str, dtype: str) -> tuple[str, str]:
    """(device, dtype): ``dtype`` checked against :data:`ATTENTION_DTYPES` first; a CPU runs float32."""
    asked, device = dtype_name("dtype", dtype, ATTENTION_DTYPES), resolve_device(device)
    return device, "float32" if device == "cpu" else asked


def pick(given: Any, device: str, quick: bool, cpu: Any, tiny: Any, full: Any) -> Any:
    return given if given is not None else cpu if device == "cpu" else tiny if quick else full


def _backends(given: Any, device: str) -> list[str]:
    """The backends asked for (default: every one this device has), checked before anything runs."""
    accepted = CPU_BACKENDS if device == "cpu" else ATTENTION_BACKENDS
    if given is None:
        return list(accepted)
    names = sequence_of("backends", given, lambda n, v: one_of(n, v, ATTENTION_BACKENDS))
    refused = [b for b in names if b not in accepted]
    if refused:
        raise ValueError(f"backends {refused} do not run on a CPU (torch has only its math and flash SDPA kernels "
                         f"there); this device accepts backends {', '.join(map(repr, accepted))}")
    return list(dict.fromkeys(names))


def _math_bytes(rows: int, seq: int, dtype: str) -> int:
    """Bytes the math path allocates beyond Q, K, V, O for ``rows`` = b·h heads: scores and probabilities
    in ``dtype`` and a float32 copy, ``2·rows·s²·itemsize + rows·s²·4``."""
    return rows * seq * seq * (2 * itemsize(dtype) + 4)


def _chunk(rows: int, seq: int, dtype: str) -> int:
    """Heads per chunk of the math reference: as many as keep its scores within :data:`_REFERENCE_BYTES`."""
    return max(1, min(rows, _REFERENCE_BYTES // _math_bytes(1, seq, dtype)))


def _attention_need(backend: str, b: int, h: int, s: int, d: int, dtype: str) -> int:
    """Bytes a point holds at once: math: Q, K, V, the checked and a timed O, :func:`_math_bytes`; fused: Q, K, V,
    O, the math reference's O, their difference (later a timed O), a chunk of its scores, float32 b·h·s stats."""
    t = b * h * s * d * itemsize(dtype)
    if backend == "math":
        return 5 * t + _math_bytes(b * h, s, dtype)
    return 6 * t + _math_bytes(_chunk(b * h, s, dtype), s, dtype) + 4 * b * h * s


def _kernel(backend: str):
    """A context in which SDPA runs ``backend`` alone."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(getattr(SDPBackend, _SDP[backend]))


def _attention(q, k, v, backend: str, causal: bool):
    """O = SDPA(Q, K, V) on ``backend`` alone."""
    import torch.nn.functional as F

    with _kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _unavailable(backend: str, head_dim: int, causal: bool, dtype: str, on: str) -> str | None:
    """Why ``backend`` cannot run a tiny call (1 sequence, 1 head, :data:`_PROBE_SEQ` tokens) of ``head_dim``
    on the torch device ``on``; None if it can. A pretend GPU (``"meta"``) has every backend."""
    import torch

    if on == "meta":
        return None
    q = torch.zeros((1, 1, _PROBE_SEQ, head_dim), device=on, dtype=torch_dtype(dtype))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            _attention(q, q, q, backend, causal)
            return None
        except (RuntimeError, NotImplementedError) as e:
            why = (" ".join(str(w.message) for w in caught) or str(e)).strip() or type(e).__name__
    return why.splitlines()[0][:240]


def _runnable(points: list[tuple], dtype: str, on: str) -> list[tuple]:
    """``points`` (backend, head_dim, causal, seq) without those whose backend this device cannot run
    (probed once per backend, head_dim and mask); a short note says which were skipped and why."""
    skipped = {key: why for key in dict.fromkeys(p[:3] for p in points) if (why := _unavailable(*key, dtype, on))}
    if skipped:
        lines = "; ".join(f"{bk} (head_dim {d}, causal={c}): {r}" for (bk, d, c), r in skipped.items())
        show(Note(f"Not run here, a tiny probe call failed: {lines}", title="Attention backends skipped"))
    return [p for p in points if p[:3] not in skipped]


def _reference(q, k, v, causal: bool):
    """The math backend's output, computed on chunks of heads (:func:`_chunk`) to bound its scores."""
    import torch

    b, h, s, d = q.shape
    out, rows = torch.empty_like(q), b * h
    flat = [t.reshape(rows, 1, s, d) for t in (q, k, v, out)]
    step = _chunk(rows, s, str(q.dtype).removeprefix("torch."))
    for i in range(0, rows, step):
        flat[3][i:i + step] = _attention(*(t[i:i + step] for t in flat[:3]), "math", causal)
    return out


def _with_peak(call: Callable[[], Any], on: str) -> tuple[Any, float]:
    """(call(), bytes it allocated beyond what was allocated before: CUDA's peak − before; NaN elsewhere)."""
    if on != "cuda":
        return call(), math.nan
    import torch

    torch.cuda.reset_peak_memory_stats()  # the allocator's counts are kept on the host: no sync needed
    before = torch.cuda.memory_allocated()
    out = call()
    return out, float(torch.cuda.max_memory_allocated() - before)


def gpu_spec(device: str) -> DeviceSpec | None:
    """The GPU measured on; None on a CPU without asking (which would measure the CPU's peaks for nothing)."""
    return measured_spec(device, cpu=False) if device == "cuda" else None


def predicted_time(fn: Callable[..., Any], spec: DeviceSpec | None, *args: Any, **kwargs: Any) -> float:
    """``fn(*args, spec=spec, **kwargs).time_s``; NaN without a GPU spec or a peak for the dtype."""
    try:
        return float(fn(*args, spec=spec, **kwargs).time_s) if spec is not None else math.nan
    except LookupError:
        return math.nan


def _run_attention(points: list[tuple], b: int, h: int, dtype: str, device: str, what: str, *,
                   on_row: Any, progress: bool) -> pd.DataFrame:
    """Measure ``points`` (backend, head_dim, causal, seq): memory checked first, then each backend
    probed, then each point's output checked against the math backend's before it is timed."""
    ensure_fits(max(_attention_need(bk, b, h, s, d, dtype) for bk, d, _, s in points), device, what=what)
    spec, on = gpu_spec(device), seeded_on(device)[0]
    points = _runnable(points, dtype, on)
    held: dict[str, Any] = {}  # one point's inputs and reference at a time, shared across its backends

    def measure(point: tuple) -> dict[str, Any]:
        import torch
        import torch.nn.functional as F

        backend, d, causal, s = point
        if held.get("key") != (d, s, causal):  # seeded Q, K, V ~N(0, 1); the previous point's tensors go first
            held.clear()
            gen = seeded_on(device)[1]
            held.update(key=(d, s, causal), qkv=[torch.randn((b, h, s, d), generator=gen, device=on,
                                                             dtype=torch_dtype(dtype)) for _ in range(3)])
        q, k, v = held["qkv"]
        out, peak = _with_peak(lambda: _attention(q, k, v, backend, causal), on)
        diff = math.nan if out.is_meta else 0.0
        if backend != "math" and not out.is_meta:
            if "reference" not in held:
                held["reference"] = _reference(q, k, v, causal)
            diff = float((out - held["reference"]).abs_().max().float())
            if not diff <= TOLERANCE[dtype]:  # NaN fails too
                raise RuntimeError(f"the {backend!r} SDPA backend disagrees with the math backend at seq {s}, head_dim "
                                   f"{d}, causal={causal}: max |difference| {diff:.3g} > {TOLERANCE[dtype]} ({dtype})")
        flops = attention_flops(b, h, s, s, d, causal=causal)
        with _kernel(backend):
            m = lean_bench(functools.partial(F.scaled_dot_product_attention, q, k, v, is_causal=causal), device,
                           f"attention {backend} b{b} h{h} s{s} d{d}{' causal' if causal else ''} {dtype}")
        return {"backend": backend, "batch": b, "heads": h, "seq": s, "head_dim": d, "causal": bool(causal),
                "dtype": dtype, "flops": flops, "bytes_fused": attention_bytes(b, h, s, s, d, dtype),
                "bytes_unfused": attention_bytes(b, h, s, s, d, dtype, fused=False), **timing_row(m),
                "tflops": m.tflop_s(flops), "peak_bytes": peak, "max_abs_diff": diff,
                "predicted_s": predicted_time(predict_attention_time, spec, b, h, s, s, d, dtype=dtype,
                                          fused=backend != "math", causal=causal)}

    try:
        return sweep(points, measure, on_row=on_row, progress=progress, desc=what.replace("_", " "))
    finally:
        held.clear()


@register("attention_backends", "PyTorch's SDPA backends (math: unfused; flash, efficient, cudnn: fused), 32 heads "
          "of 128, 512 to 16,384 tokens, causal or not: the s² scores against a fused kernel", ATTENTION_COLUMNS,
          needs=("cuda",))
def attention_backends(*, backends=None, seqs=None, causal=(False, True), batch=None, heads=None, head_dim=None,
                       dtype="bfloat16", device="auto", quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """Each backend, sequence length (s_q = s_k) and mask. GPU: batch 1, 32 heads of 128 (LLaMA-2-7B's
    attention), seqs 512 … 16,384 (``quick``: 512, 2048), the math backend up to 8,192 unless ``seqs``
    is given, every backend this GPU runs (others skipped with a note). CPU: 4 heads of 64, seqs 128 …
    1,024, float32, math and flash."""
    device, d = setup(device, dtype)
    names = _backends(backends, device)
    seqs_ = sequence_of("seqs", pick(seqs, device, quick, _CPU_SEQS, _QUICK_SEQS, _GPU_SEQS), positive_int)
    masks = [bool(c) for c in sequence_of("causal", causal, boolean, single=True)]
    b = positive_int("batch", 1 if batch is None else batch)
    h = positive_int("heads", pick(heads, device, quick, 4, 32, 32))
    hd = positive_int("head_dim", pick(head_dim, device, quick, 64, 128, 128))
    cap = _MATH_MAX_SEQ if seqs is None else math.inf
    points = [(bk, hd, c, s) for s in seqs_ for c in masks for bk in names if bk != "math" or s <= cap]
    return _run_attention(points, b, h, d, device, "attention_backends", on_row=on_row, progress=progress)


@register("attention_head_dims", "PyTorch's SDPA backends at head dimensions 64, 80, 96, 128 and 256 (32 heads, "
          "4,096 tokens): TFLOP/s as the head dimension changes", ATTENTION_COLUMNS, needs=("cuda",))
def attention_head_dims(*, head_dims=None, backends=None, seq=None, batch=None, heads=None, causal=False,
                        dtype="bfloat16", device="auto", quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """Each backend and head dimension at one sequence length. GPU: 64, 80, 96, 128, 256 at seq 4,096,
    batch 1, 32 heads (``quick``: 64, 80, 128 at 2,048), every backend this GPU runs. CPU: 64, 80, 96,
    128 at seq 512, 4 heads, float32, math and flash."""
    device, d = setup(device, dtype)
    names = _backends(backends, device)
    dims = sequence_of("head_dims", pick(head_dims, device, quick, _CPU_DIMS, _QUICK_DIMS, _GPU_DIMS), positive_int)
    s = positive_int("seq", pick(seq, device, quick, 512, 2048, 4096))
    mask = boolean("causal", causal)
    b = positive_int("batch", 1 if batch is None else batch)
    h = positive_int("heads", pick(heads, device, quick, 4, 32, 32))
    points = [(bk, hd, mask, s) for hd in dims for bk in names]
    return _run_attention(points, b, h, d, device, "attention_head_dims", on_row=on_row, progress=progress)
