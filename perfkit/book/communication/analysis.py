"""Chapter 08_communication: collectives as the α-β model predicts them, the published tables in the
experiment's columns, and the effects the verdicts read off any such frame.

A *collective frame* has the columns of ``collective_sizes`` that matter here (:data:`COLUMNS`): ``op``,
``n_ranks``, ``size_bytes`` (nccl-tests' count), ``time_s``, ``algbw_GBps``, ``busbw_GBps`` and
``predicted_s``. :func:`predicted_collectives` gives the model's (``time_s`` empty, ``predicted_s``
from :func:`perfkit.collectives.explain_collective`); :func:`xla_frame` and :func:`deepbench_frame` put
the published tables (XLA's 8× H100, 2025; DeepBench's 2017 nodes) into the same columns, keeping
their publishers' metadata. :func:`time_at` reads a frame at any size by log-log interpolation between
the sizes it measured.

The effects (:func:`latency_gain`, :func:`gpu_count_ratio`, :func:`bucket_share`) read any collective
frame, measured or predicted (through :func:`perfkit.book.evidence.as_measured`), and return a ratio,
or None where the rows they need are missing; :func:`flop_per_byte` sets compute against the bus
bandwidth. The training side (data and tensor parallelism) is :mod:`.training`. Seconds, bytes, bytes/s.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..._validate import positive_int, positive_number, sequence_of
from ...collectives import bus_bandwidth, explain_collective
from ...devices import DeviceSpec, resolve_spec
from ...dtypes import canonical_dtype
from ...interconnects import LinkSpec, link_spec
from ...provenance import Source
from ...units import MiB

__all__ = ["BUCKET_BYTES", "COLUMNS", "SIZES", "SMALL_BYTES", "bucket_share", "busbw_at", "deepbench_frame",
           "flop_per_busbw_byte", "flop_per_byte", "gpu_count_ratio", "half_bandwidth_bytes", "largest_busbw",
           "latency_gain", "model_source", "predicted_collectives", "time_at", "xla_frame"]

#: The columns of a collective frame (``collective_sizes``' own, those the effects read).
COLUMNS: tuple[str, ...] = ("op", "backend", "n_ranks", "size_bytes", "time_s", "algbw_GBps", "busbw_GBps",
                            "predicted_s")
#: The message sizes of the model's frames: 1 KiB … 2 GiB, every power of two (XLA's table's sizes).
SIZES: tuple[int, ...] = tuple(2**k for k in range(10, 32))
#: DeepBench's smallest all-reduce: 100,000 floats (400 KB), the "small message" the latency rule reads.
SMALL_BYTES = 400_000
#: PyTorch DDP's default gradient bucket (``bucket_cap_mb=25``), bytes.
BUCKET_BYTES = 25 * MiB
def _sizes(name: str, values: Any) -> list[int]:
    return sequence_of(name, values, positive_int)


def model_source(link: str | LinkSpec, n_ranks: int, *, algorithm: str = "ring",
                 inter_link: str | LinkSpec | None = None, ranks_per_node: int | None = None) -> Source:
    """The :class:`~perfkit.provenance.Source` of the model's numbers for ``n_ranks`` GPUs on ``link``
    (and ``inter_link`` between nodes of ``ranks_per_node``): ``"model of 8 GPUs over NVLink 4 (…):
    α-β, ring, NCCL's link constants"``."""
    intra = link_spec(link)
    where = f"{n_ranks} GPUs over {intra.name}"
    if inter_link is not None:
        where += f", {link_spec(inter_link).name} between nodes of {ranks_per_node}"
    return Source("model", where, detail=f"α-β (perfkit.collectives), {algorithm}, NCCL's link constants")


def predicted_collectives(link: str | LinkSpec = "nvlink4", *, n_ranks: Sequence[int] = (8,),
                          sizes: Sequence[int] = SIZES, ops: Sequence[str] = ("all-reduce",),
                          algorithm: str = "ring", inter_link: str | LinkSpec | None = None,
                          ranks_per_node: int | None = None) -> pd.DataFrame:
    """``collective_sizes``' rows as the α-β model predicts them (nothing measured: ``time_s`` empty):
    ``predicted_s`` (:func:`perfkit.collectives.explain_collective`), with its ``latency_s``,
    ``transfer_s``, ``bound``, ``algorithm`` and ``link``. Caption the figure with :func:`model_source`."""
    ns, sizes_ = sequence_of("n_ranks", n_ranks, positive_int), _sizes("sizes", sizes)
    ops_ = sequence_of("ops", ops)
    rows = []
    for op in ops_:
        for n in ns:
            for s in sizes_:
                p = explain_collective(op, s, n, link, algorithm=algorithm, inter_link=inter_link,
                                       ranks_per_node=ranks_per_node)
                rows.append({"op": p.op, "backend": "model", "n_ranks": n, "size_bytes": s, "time_s": math.nan,
                             "algbw_GBps": math.nan, "busbw_GBps": math.nan, "predicted_s": p.time_s,
                             "latency_s": p.latency_s, "transfer_s": p.transfer_s, "bound": p.bound,
                             "algorithm": p.algorithm, "link": p.link.key})
    return pd.DataFrame(rows)


def _published(frame: pd.DataFrame, rows: pd.DataFrame, device_name: str | None = None) -> pd.DataFrame:
    """``rows`` with the frame's publisher metadata (and ``device_name``, the system kept)."""
    out = rows.reset_index(drop=True)
    meta = dict(frame.attrs.get("meta", {}))
    if device_name is not None:
        meta["device_name"] = device_name
    out.attrs = {**frame.attrs, "meta": meta}
    return out


def xla_frame(xla: pd.DataFrame | None, *, op: str = "all-reduce", n_ranks: int | None = None) -> pd.DataFrame | None:
    """XLA's H100 collective table (``pk.published("xla_h100_collectives")``) in the columns of a
    collective frame, ``op`` only, on ``n_ranks`` GPUs (None: 2, 4 and 8; groups of 2 and 4 ran 4 or 2 at
    a time on the 8 GPUs). None in, or no such rows: None."""
    if xla is None:
        return None
    rows = xla[(xla["collective"] == op) & ((xla["n_gpus"] == n_ranks) if n_ranks is not None else True)]
    out = pd.DataFrame({"op": rows["collective"], "backend": "NCCL (XLA)", "n_ranks": rows["n_gpus"].astype(int),
                        "size_bytes": rows["size_bytes"].astype(np.int64), "time_s": rows["time_s"],
                        "algbw_GBps": rows["algbw_GBps"], "busbw_GBps": rows["busbw_GBps"],
                        "predicted_s": math.nan})
    return _published(xla, out) if len(out) else None


def deepbench_frame(deepbench: pd.DataFrame | None, *, system: str = "P100", nodes: int = 1,
                    n_ranks: int | None = None) -> pd.DataFrame | None:
    """DeepBench's 2017 all-reduce (``pk.published("deepbench_allreduce")``) in the columns of a collective
    frame: the rows of the GPU system whose name contains ``system`` on ``nodes`` nodes (and ``n_ranks``
    GPUs; None: all). None in, or no such rows: None."""
    if deepbench is None:
        return None
    rows = deepbench[deepbench["system"].str.contains(system, case=False, regex=False)
                     & (deepbench["n_nodes"] == positive_int("nodes", nodes))
                     & ((deepbench["n_ranks"] == n_ranks) if n_ranks is not None else True)
                     & ~deepbench["device_type"].astype(str).str.startswith("CPU")]
    if not len(rows):
        return None
    out = pd.DataFrame({"op": "all-reduce", "backend": rows["algorithm"], "n_ranks": rows["n_ranks"].astype(int),
                        "size_bytes": rows["size_bytes"].astype(np.int64), "time_s": rows["time_s"],
                        "algbw_GBps": rows["algbw_GBps"], "busbw_GBps": rows["busbw_GBps"],
                        "predicted_s": math.nan})
    return _published(deepbench, out, str(rows["system"].iloc[0]))


# -------------------------------------------------------------------------------------- reading a curve
def _curve(frame: pd.DataFrame | None, n_ranks: int | None, op: str) -> pd.Series | None:
    """Median time per size (sorted) of ``frame``'s measured ``op`` rows on ``n_ranks`` (None: the most
    ranks in the frame); None when there are none."""
    if frame is None or not len(frame) or "time_s" not in frame:
        return None
    rows = frame[(frame["op"] == op) & np.isfinite(frame["time_s"]) & (frame["time_s"] > 0)]
    if not len(rows):
        return None
    n = int(rows["n_ranks"].max()) if n_ranks is None else n_ranks
    rows = rows[rows["n_ranks"] == n]
    return rows.groupby("size_bytes")["time_s"].median().sort_index() if len(rows) else None


def _ranks(frame: pd.DataFrame | None, n_ranks: int | None, op: str) -> int | None:
    if n_ranks is not None:
        return n_ranks
    if frame is None or not len(frame):
        return None
    rows = frame[(frame["op"] == op) & np.isfinite(frame["time_s"])]
    return int(rows["n_ranks"].max()) if len(rows) else None


def time_at(frame: pd.DataFrame | None, nbytes: float, *, n_ranks: int | None = None, op: str = "all-reduce",
            below: str = "none") -> float | None:
    """Seconds of one ``op`` of ``nbytes`` on ``n_ranks`` (None: the most in the frame), read off a
    collective frame: its time at that size, else interpolated linearly in log(time) against log(size)
    between the two sizes around it. Outside the sizes measured: None, or with ``below="floor"`` the
    smallest size's time for a smaller message (a latency-bound message costs about the same)."""
    curve = _curve(frame, n_ranks, op)
    nbytes = positive_number("nbytes", nbytes)
    if curve is None:
        return None
    sizes, times = curve.index.to_numpy(float), curve.to_numpy(float)
    if nbytes < sizes[0]:
        return float(times[0]) if below == "floor" else None
    if nbytes > sizes[-1]:
        return None
    return float(np.exp(np.interp(np.log(nbytes), np.log(sizes), np.log(times))))


def busbw_at(frame: pd.DataFrame | None, nbytes: float, *, n_ranks: int | None = None,
             op: str = "all-reduce") -> float | None:
    """nccl-tests' bus bandwidth (bytes/s) of ``op`` at ``nbytes`` (:func:`time_at`); None outside the sizes."""
    n = _ranks(frame, n_ranks, op)
    t = time_at(frame, nbytes, n_ranks=n, op=op)
    return None if t is None or n is None else bus_bandwidth(op, nbytes, n, t)


def largest_busbw(frame: pd.DataFrame | None, *, n_ranks: int | None = None,
                  op: str = "all-reduce") -> tuple[int, float] | None:
    """(size, bus bandwidth in bytes/s) of the largest ``op`` message measured on ``n_ranks``; None without."""
    n = _ranks(frame, n_ranks, op)
    curve = _curve(frame, n, op)
    if curve is None:
        return None
    size = int(curve.index[-1])
    return size, bus_bandwidth(op, size, n, float(curve.iloc[-1]))


def half_bandwidth_bytes(frame: pd.DataFrame | None, *, n_ranks: int | None = None,
                         op: str = "all-reduce") -> int | None:
    """The smallest message measured whose bus bandwidth reaches half that of the largest (Hockney's
    n½, read off the sizes a frame has: the smallest size itself where every message reaches it)."""
    n = _ranks(frame, n_ranks, op)
    curve = _curve(frame, n, op)
    if curve is None:
        return None
    busbw = [bus_bandwidth(op, s, n, t) for s, t in curve.items()]
    return int(next(s for s, b in zip(curve.index, busbw) if b >= busbw[-1] / 2))


# ------------------------------------------------------------------------------------------ the effects
def latency_gain(frame: pd.DataFrame | None, *, n_ranks: int | None = 8, small: float = SMALL_BYTES) -> float | None:
    """Bus bandwidth of the largest all-reduce ÷ that of a ``small`` one (default 400 KB, DeepBench's
    smallest): how far below the bandwidth a small message runs."""
    big, low = largest_busbw(frame, n_ranks=n_ranks), busbw_at(frame, small, n_ranks=n_ranks)
    return None if big is None or low is None else big[1] / low


def gpu_count_ratio(frame: pd.DataFrame | None, *, many: int = 8, few: int = 2) -> float | None:
    """Bus bandwidth of a large all-reduce on ``many`` ranks ÷ on ``few``, at the largest size both
    measured: 1 where a ring's bandwidth does not depend on the number of GPUs."""
    a, b = _curve(frame, many, "all-reduce"), _curve(frame, few, "all-reduce")
    if a is None or b is None:
        return None
    size = min(a.index[-1], b.index[-1])
    hi, lo = busbw_at(frame, size, n_ranks=many), busbw_at(frame, size, n_ranks=few)
    return None if hi is None or lo is None else hi / lo


def bucket_share(frame: pd.DataFrame | None, *, n_ranks: int | None = 8,
                 bucket: float = BUCKET_BYTES) -> float | None:
    """Bus bandwidth of one ``bucket`` (default DDP's 25 MiB) ÷ that of the largest all-reduce."""
    big, one = largest_busbw(frame, n_ranks=n_ranks), busbw_at(frame, bucket, n_ranks=n_ranks)
    return None if big is None or one is None else one / big[1]


def flop_per_byte(systems: dict[str, tuple[str | DeviceSpec, Any, pd.DataFrame | None]], *,
                  n_ranks: int = 8) -> pd.DataFrame:
    """Compute against communication, one row per named ``(GPU, dtype, collective frame)`` of ``systems``
    whose frame is not None (a model frame's ``predicted_s`` stands for its times): the GPU's datasheet
    peak in that dtype, the bus bandwidth of the largest all-reduce on ``n_ranks`` GPUs, the FLOPs the
    GPU can do while the bus moves one byte (:func:`flop_per_busbw_byte`), and the half-bandwidth
    message (:func:`half_bandwidth_bytes`)."""
    rows = []
    for name, (spec, dtype, frame) in systems.items():
        if frame is None:
            continue
        if not frame["time_s"].notna().any():
            frame = frame.assign(time_s=frame["predicted_s"])
        largest = largest_busbw(frame, n_ranks=n_ranks)
        if largest is None:
            continue
        spec = resolve_spec(spec, none_ok=False)
        rows.append({"system": name, "GPU": spec.name, "dtype": canonical_dtype(dtype),
                     "peak TFLOP/s": spec.peak_flop_s(dtype) / 1e12, "largest message": largest[0],
                     "busbw GB/s": largest[1] / 1e9,
                     "FLOP per busbw byte": flop_per_busbw_byte(spec, dtype, largest[1]),
                     "half-bandwidth message": half_bandwidth_bytes(frame, n_ranks=n_ranks)})
    return pd.DataFrame(rows)


def flop_per_busbw_byte(spec: str | DeviceSpec, dtype: Any, busbw: float) -> float:
    """``spec``'s datasheet peak FLOP/s in ``dtype`` ÷ a bus bandwidth (bytes/s): the FLOPs a GPU can do
    in the time its all-reduce moves one byte over the bus."""
    spec = resolve_spec(spec, none_ok=False)
    return spec.peak_flop_s(dtype) / positive_number("busbw", busbw)
