"""What the room should see in each lab: perfkit's prediction for a T4 beside our H200 recording.

:func:`expectations` takes the recordings as frames (the page loads them with
:func:`perfkit.data.load`; nothing here reads ``data/``) and returns one row per number a lab shows:
what it is, the T4's value by perfkit's models (labelled a prediction: nothing in this book was
measured on a T4) and the H200's value in our recording, each shape the same on both.
"""

from __future__ import annotations

from typing import Callable, Mapping

import pandas as pd

from ...ceilings import achievable_ceilings
from ...devices import DeviceSpec, device_spec
from ...gemm_model import predict_gemm_time
from ...memory_model import layer_bytes, predict_layer_time
from ...meta import FrameMeta
from ...roofline import gemm_flops
from ...transformer import predict_decode_time
from .plan import LABS

#: The recordings each lab's expectations read (experiment names), by lab page.
RECORDED: dict[str, tuple[str, ...]] = {
    "labs/01_roofline": ("ceiling_matmul", "ceiling_copy", "fc_batch"),
    "labs/02_gemm": ("gemm_sizes", "gemm_alignment"),
    "labs/03_memory_bound": ("activation_sizes",),
    "labs/04_transformers": ("decode_steps",),
}
COLUMNS = ("what", "T4 (perfkit's prediction)", "H200 (our recording)")


def _one(frame: pd.DataFrame, what: str, **match) -> pd.Series:
    rows = frame
    for k, v in match.items():
        rows = rows[rows[k] == v]
    if rows.empty:
        raise LookupError(f"the {what} recording has no row with {match}")
    return rows.iloc[0]


def _gemm_tflops(M: int, N: int, K: int, spec: DeviceSpec) -> float:
    return gemm_flops(M, N, K) / predict_gemm_time(M, N, K, "float16", spec) / 1e12


def _roofline(t4: DeviceSpec, rec: Mapping[str, pd.DataFrame]) -> list[tuple]:
    c = achievable_ceilings(t4)
    mm, copy = rec["ceiling_matmul"], rec["ceiling_copy"]
    h200_tflops = mm[mm["dtype"] == "float16"]["tflops"].max()
    h200_gbps = copy["gbps"].max()
    fc = _one(rec["fc_batch"], "fc_batch", batch=256, dtype="float16")
    return [("best FP16 matmul, TFLOP/s", c.flop_s["float16"] / 1e12, h200_tflops),
            ("copy bandwidth, GB/s", c.bandwidth / 1e9, h200_gbps),
            ("ridge: the two above, FLOP per byte", c.flop_s["float16"] / c.bandwidth, h200_tflops * 1e3 / h200_gbps),
            ("4096→4096 layer at batch 256 (FP16), TFLOP/s", _gemm_tflops(4096, 256, 4096, t4), fc["tflops"])]


def _gemm(t4: DeviceSpec, rec: Mapping[str, pd.DataFrame]) -> list[tuple]:
    sizes, align = rec["gemm_sizes"], rec["gemm_alignment"]
    rows = []
    for m in (1024, 4096):
        r = _one(sizes, "gemm_sizes", M=m, N=m, K=4096, dtype="float16", sweep="mn")
        rows.append((f"{m}×{m}×4096 FP16 GEMM, TFLOP/s", _gemm_tflops(m, m, 4096, t4), r["tflops"]))
    odd = _one(align, "gemm_alignment", K=4095, dtype="float16")["time_s"]
    even = _one(align, "gemm_alignment", K=4096, dtype="float16")["time_s"]
    t4_ratio = predict_gemm_time(4096, 4096, 4095, "float16", t4) / predict_gemm_time(4096, 4096, 4096, "float16", t4)
    rows.append(("4096×4096 GEMM, K = 4095 against K = 4096 (× time)", t4_ratio, odd / even))
    return rows


def _memory(t4: DeviceSpec, rec: Mapping[str, pd.DataFrame]) -> list[tuple]:
    def relu(n: int) -> tuple[float, pd.Series]:  # FP16 on a T4: the bytes of the H200's BF16
        r = _one(rec["activation_sizes"], "activation_sizes", op="relu", elements=n, **{"pass": "forward"})
        return predict_layer_time("relu", (n,), "float16", t4), r

    small_s, small = relu(2**14)
    big_s, big = relu(2**24)
    return [("ReLU forward, 2^14 elements, microseconds", small_s * 1e6, small["time_s"] * 1e6),
            ("ReLU forward, 2^24 elements, GB/s", layer_bytes("relu", (2**24,), "float16") / big_s / 1e9, big["gbps"])]


def _decode(t4: DeviceSpec, rec: Mapping[str, pd.DataFrame]) -> list[tuple]:
    rows = []
    for batch in (1, 64):
        r = _one(rec["decode_steps"], "decode_steps", batch=batch, kv_heads=32)
        p = predict_decode_time(int(r["params"]), batch, int(r["context"]), layers=int(r["layers"]),
                                kv_heads=32, head_dim=int(r["head_dim"]), dtype="float16", spec=t4)
        rows.append((f"decoding, {int(r['layers'])} LLaMA-7B layers, batch {batch}, "
                     f"{int(r['context']):,} tokens of context: tokens/s", batch / p.time_s, r["tokens_per_s"]))
    return rows


_BUILDERS: dict[str, Callable[[DeviceSpec, Mapping[str, pd.DataFrame]], list[tuple]]] = {
    "labs/01_roofline": _roofline, "labs/02_gemm": _gemm, "labs/03_memory_bound": _memory,
    "labs/04_transformers": _decode,
}


def expectations(lab: str, recordings: Mapping[str, pd.DataFrame], t4: DeviceSpec | None = None) -> pd.DataFrame:
    """The numbers lab ``lab`` (``"labs/02_gemm"``) shows: a T4's by perfkit's models, the H200's as
    recorded. ``recordings`` maps each experiment of :data:`RECORDED` ``[lab]`` to its H200 frame.

    ``LookupError`` for an unknown lab or a recording that lacks a needed row; ``ValueError`` for a
    missing recording or one not made on an H200. ``frame.attrs["recorded"]`` says when each was made."""
    if lab not in _BUILDERS:
        raise LookupError(f"unknown lab {lab!r}; labs: {', '.join(LABS)}")
    missing = [n for n in RECORDED[lab] if n not in recordings or recordings[n] is None]
    if missing:
        raise ValueError(f"recordings lacks {missing}: pass pk.data.load(name, 'nvidia-h200') for each")
    when = {}
    for name in RECORDED[lab]:
        meta = FrameMeta.of(recordings[name])
        if meta.device_name != "NVIDIA H200":
            raise ValueError(f"recordings[{name!r}] was made on {meta.device_name!r}, not an H200")
        when[name] = str(meta.recorded_at)[:10]
    rows = _BUILDERS[lab](t4 or device_spec("T4"), recordings)
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame.attrs["recorded"] = when
    return frame
