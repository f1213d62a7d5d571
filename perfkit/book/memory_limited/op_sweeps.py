"""Three memory-bound ops of real models, at the sizes those models run them: the recordings the advisor's
op models are checked against (the validation harness found GPT-2's layer norm and token embedding and
ResNet-50's batch norms off where no such recording existed).

- ``batchnorm_channels``: training batch norm at every shape ResNet-50 runs it at batch 32 (C = 64 … 2048),
  forward and backward, NCHW and NHWC: ``batchnorm_sizes``' rows and columns (its row function, reused).
- ``layernorm_sizes``: ``F.layer_norm`` with weight and bias, hidden 768 … 8192, 2048 … 32768 tokens.
- ``embedding_sizes``: ``F.embedding`` forward, and its training backward: the dense gradient of the whole
  table (``embedding_dense_backward``: a sort of the indices, a scatter-add, a zero fill of V×D).

Each backward is its aten kernel alone, from saved tensors. ``predicted_s`` is the advisor's price of the
pass (:func:`perfkit.op_model.op_time_s`, as :class:`perfkit.advisor.price.Pricer` calls it) on the measured
GPU, NaN on a CPU. GPU: bfloat16 at the real sizes (each sweep ≤ 20 s on an H200); CPU: float32, small,
one thread. Units: seconds, bytes.
"""

from __future__ import annotations

import functools
from typing import Any

import pandas as pd

from ..._validate import positive_int, sequence_of
from ...dtypes import itemsize, torch_dtype
from ...matmul import seeded_on
from ...memory_model import PASSES as _PASSES
from ...memory_model import layer_bytes
from ...op_model import op_time_s
from ...placement import ensure_fits, lean_bench
from ...experiments.measure import measured_spec, sweep, timing_row
from ...experiments.registry import register
from .experiments import (_BN_COLUMNS, _PASS, _TIMING, LAYOUTS, _batchnorm_sweep, _pick, _predict, _setup,
                          _shape4)

__all__ = ["EMBEDDING_SIZES", "LAYERNORM_SIZES", "RESNET50_BATCHNORMS", "batchnorm_channels", "embedding_sizes",
           "layernorm_sizes"]

#: Every (N, C, H, W) ResNet-50 (v1.5, perfkit.zoo.resnet50) normalizes in a training step at batch 32 on
#: 224×224 images → how many of its 53 batch norms run at it: the stem's (112²), then per stage (56², 28²,
#: 14², 7²) the bottlenecks' inner width (×1) and output (×4); a stage's first block normalizes its
#: first 1×1 conv's output at the previous stage's size (the stride is on the 3×3 conv).
RESNET50_BATCHNORMS: dict[tuple[int, int, int, int], int] = {
    (32, 64, 112, 112): 1, (32, 64, 56, 56): 6, (32, 256, 56, 56): 4, (32, 128, 56, 56): 1,
    (32, 128, 28, 28): 7, (32, 512, 28, 28): 5, (32, 256, 28, 28): 1, (32, 256, 14, 14): 11,
    (32, 1024, 14, 14): 7, (32, 512, 14, 14): 1, (32, 512, 7, 7): 5, (32, 2048, 7, 7): 4}
#: Layer norm and embedding sizes per run: GPU, quick and CPU (float32, one thread). GPT-2 small runs its
#: layer norms on 8·1024 tokens × 768 and looks up 8·1024 tokens in a 50257 × 768 table (50304: padded to 64).
LAYERNORM_SIZES: dict[str, dict[str, tuple[int, ...]]] = {
    "gpu": {"hidden": (768, 1024, 4096, 8192), "tokens": (2048, 8192, 32768)},
    "quick": {"hidden": (768, 4096), "tokens": (8192,)},
    "cpu": {"hidden": (64, 768), "tokens": (128, 1024)}}
EMBEDDING_SIZES: dict[str, dict[str, tuple[int, ...]]] = {
    "gpu": {"vocab": (32000, 50257, 50304), "dim": (768, 4096), "tokens": (2048, 8192)},
    "quick": {"vocab": (50257, 50304), "dim": (768,), "tokens": (8192,)},
    "cpu": {"vocab": (1001, 1024), "dim": (64, 256), "tokens": (256,)}}

_BN_QUICK = ((32, 64, 56, 56), (32, 128, 28, 28), (32, 256, 14, 14), (32, 512, 7, 7), (32, 1024, 14, 14),
             (32, 2048, 7, 7))  # one per channel count: the most frequent
_BN_CPU = tuple((1, *s[1:]) for s in _BN_QUICK)
_EPS = 1e-5
_OP_PREDICTED = ("the advisor's price of the pass (perfkit.op_model.op_time_s: bytes at the achievable bandwidth "
                 "plus a kernel's fixed cost) on the measured GPU, seconds; NaN on a CPU")


def _sizes(table: dict, device: str, quick: bool, **given: Any) -> list[list[int]]:
    """Each of ``given`` (a positive integer or a list of them, checked), else the run's sizes in ``table``."""
    run = "cpu" if device == "cpu" else "quick" if quick else "gpu"
    return [sequence_of(name, table[run][name] if value is None else value, positive_int, single=True)
            for name, value in given.items()]


@register("batchnorm_channels", "Batch norm in training mode (F.batch_norm) at every shape ResNet-50 runs it at "
          "batch 32, C = 64 … 2048, forward and backward, NCHW and NHWC: time against the byte models",
          _BN_COLUMNS, needs=("cuda",))
def batchnorm_channels(*, shapes=None, layouts=LAYOUTS, dtype="bfloat16", device="auto", quick=False, progress=True,
                       on_row=None) -> pd.DataFrame:
    """Each (N, C, H, W) in ``shapes``, layout and pass, as ``batchnorm_sizes`` times them. GPU: the 12 shapes of
    :data:`RESNET50_BATCHNORMS`; ``quick``: one per channel count; CPU: those at batch 1, in float32."""
    device, d = _setup(device, dtype)
    dims = sequence_of("shapes", _pick(shapes, device, quick, _BN_CPU, _BN_QUICK, tuple(RESNET50_BATCHNORMS)),
                       _shape4)
    return _batchnorm_sweep(dims, layouts, d, device, "batchnorm_channels", on_row, progress)


def _layernorm_fns(tokens: int, hidden: int, dtype: str, device: str):
    """``(forward, backward)``: F.layer_norm over the last dim with weight and bias (in ``dtype``, as CUDA's
    kernel takes them), and its aten backward kernel alone (dx, dweight and dbias, from the saved statistics)."""
    import torch
    import torch.nn.functional as F

    on, gen = seeded_on(device)
    randn = functools.partial(torch.randn, generator=gen, device=on, dtype=torch_dtype(dtype))
    x, dy = randn((tokens, hidden)), randn((tokens, hidden))
    w, b = randn(hidden), randn(hidden)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [hidden], w, b, _EPS)
    return (lambda: F.layer_norm(x, (hidden,), w, b, _EPS),
            lambda: torch.ops.aten.native_layer_norm_backward(dy, x, [hidden], mean, rstd, w, b, [True, True, True]))


_LN_COLUMNS = dict(tokens="rows normalized (batch × sequence)", hidden="elements per row (the normalized dim)",
                   elements="tokens · hidden", **{"pass": _PASS}, dtype="storage dtype of x, weight and bias",
                   bytes="pk.layer_bytes('layernorm'), persistent (the advisor's): x read once per pass, bytes",
                   bytes_two_pass="pk.layer_bytes('layernorm', persistent=False): each row read twice, bytes",
                   **_TIMING, gbps="bytes / time_s, 1e9 bytes/s", predicted_s=_OP_PREDICTED)


@register("layernorm_sizes", "Layer norm (F.layer_norm with weight and bias) forward and backward, hidden 768 … "
          "8192, 2048 … 32768 tokens (GPT-2: 8192 × 768): time against bytes and the advisor's price",
          _LN_COLUMNS, needs=("cuda",))
def layernorm_sizes(*, hidden=None, tokens=None, dtype="bfloat16", device="auto", quick=False, progress=True,
                    on_row=None) -> pd.DataFrame:
    """Each ``hidden`` × ``tokens`` and pass (:data:`LAYERNORM_SIZES`: 12 shapes on a GPU, 2 quick, 4 on a CPU
    in float32)."""
    device, d = _setup(device, dtype)
    hiddens, counts = _sizes(LAYERNORM_SIZES, device, quick, hidden=hidden, tokens=tokens)
    ensure_fits(5 * max(hiddens) * max(counts) * itemsize(d), device, what="layernorm_sizes")  # x, y, dy, dx
    spec = measured_spec(device, cpu=False)
    points = [(t, h, p) for h in hiddens for t in counts for p in _PASSES]

    def measure(point):
        t, h, p = point
        forward, backward = _layernorm_fns(t, h, d, device)
        m = lean_bench(forward if p == "forward" else backward, device, f"layer norm {p} {t}×{h} {d}")
        nbytes = {k: layer_bytes("layernorm", (t, h), d, pass_=p, persistent=k) for k in (True, False)}
        return {"tokens": t, "hidden": h, "elements": t * h, "pass": p, "dtype": d, "bytes": nbytes[True],
                "bytes_two_pass": nbytes[False], **timing_row(m), "gbps": m.gbps(nbytes[True]),
                "predicted_s": _predict(op_time_s, "layernorm", (t, h), d, spec=spec, pass_=p)}

    return sweep(points, measure, on_row=on_row, progress=progress, desc="layer norm")


def _embedding_fns(vocab: int, dim: int, tokens: int, dtype: str, device: str):
    """``(forward, backward)``: F.embedding of ``tokens`` uniformly random int64 ids in a ``vocab`` × ``dim``
    table, and the backward training runs (``sparse=False``): ``embedding_dense_backward``, the whole
    table's gradient."""
    import torch
    import torch.nn.functional as F

    on, gen = seeded_on(device)
    table = torch.randn((vocab, dim), generator=gen, device=on, dtype=torch_dtype(dtype))
    ids = torch.randint(vocab, (tokens,), generator=gen, device=on)
    dy = torch.randn((tokens, dim), generator=gen, device=on, dtype=torch_dtype(dtype))
    return (lambda: F.embedding(ids, table),
            lambda: torch.ops.aten.embedding_dense_backward(dy, ids, vocab, -1, False))


_EMB_COLUMNS = dict(vocab="rows of the table (num_embeddings)", dim="elements per row (embedding_dim)",
                    tokens="ids looked up (uniformly random, int64)",
                    **{"pass": "'forward' (a gather of rows) or 'backward' (aten.embedding_dense_backward alone: "
                               "sort the ids, add each token's dy into its row, the V×D gradient zero-filled)"},
                    dtype="storage dtype of the table", bytes="pk.layer_bytes('embedding', (tokens, dim), "
                    "num_embeddings=vocab): the rows and ids forward; dy, the ids and the whole V×D gradient "
                    "backward, bytes", **_TIMING, gbps="bytes / time_s, 1e9 bytes/s", predicted_s=_OP_PREDICTED)


@register("embedding_sizes", "Token embedding (F.embedding) forward and its dense backward (the whole table's "
          "gradient), vocab 32000 / 50257 / 50304, dim 768 and 4096, 2048 and 8192 tokens: time against bytes",
          _EMB_COLUMNS, needs=("cuda",))
def embedding_sizes(*, vocab=None, dim=None, tokens=None, dtype="bfloat16", device="auto", quick=False,
                    progress=True, on_row=None) -> pd.DataFrame:
    """Each ``vocab`` × ``dim`` × ``tokens`` and pass (:data:`EMBEDDING_SIZES`: 12 on a GPU, 2 quick, 4 on a CPU
    in float32)."""
    device, d = _setup(device, dtype)
    vocabs, dims, counts = _sizes(EMBEDDING_SIZES, device, quick, vocab=vocab, dim=dim, tokens=tokens)
    s = itemsize(d)  # the table and its gradient, the output and dy, the ids and the sort's temporaries
    ensure_fits(max(vocabs) * max(dims) * 2 * s + max(counts) * (max(dims) * 2 * s + 32), device,
                what="embedding_sizes")
    spec = measured_spec(device, cpu=False)
    points = [(v, e, t, p) for v in vocabs for e in dims for t in counts for p in _PASSES]

    def measure(point):
        v, e, t, p = point
        forward, backward = _embedding_fns(v, e, t, d, device)
        m = lean_bench(forward if p == "forward" else backward, device, f"embedding {p} {v}×{e}, {t} tokens {d}")
        nbytes = layer_bytes("embedding", (t, e), d, pass_=p, num_embeddings=v)
        return {"vocab": v, "dim": e, "tokens": t, "pass": p, "dtype": d, "bytes": nbytes, **timing_row(m),
                "gbps": m.gbps(nbytes),
                "predicted_s": _predict(op_time_s, "embedding", (t, e), d, spec=spec, pass_=p, num_embeddings=v)}

    return sweep(points, measure, on_row=on_row, progress=progress, desc="embedding")
