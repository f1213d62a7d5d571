"""The best GEMM the newest GPUs reach, against their datasheets ("next": Blackwell and AMD Instinct).

Pure functions of ml-engineering's published MAMF table (``pk.published("mamf_newest")``: per GPU and
dtype, the best 2·M·N·K / mean time of ``torch.mm`` or ``torch._scaled_mm`` over a brute-force
search of shapes, 2025). :func:`mamf_rows` keeps the rows of the GPUs asked for, each with perfkit's
datasheet peak (``pk.device_spec``, not the table's own "Theory" column) and the fraction of it
reached, and :func:`caption_of` says who measured them and how (chapter 1's table of the newest GPUs,
:mod:`perfkit.book.background.newest`, shows them; chapter 2's prose cites them).

The rows compare hardware *and* software: each GPU ran its own torch/CUDA/ROCm version and
settings (PyTorch TunableOp on for the MI300X, off for the MI355X), and a maximum over many noisy
means is optimistic. Units: TFLOP/s (10¹² FLOP/s), fractions of the dense datasheet peak.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from ..._validate import frame_or_none
from ...devices import device_spec
from ...dtypes import canonical_dtype
from ...meta import FrameMeta
from ..figures import published_label

__all__ = ["MAMF_GPUS", "caption_of", "mamf_rows"]

#: The GPUs the chapters show from the MAMF table: Blackwell (B200, GB200) and AMD Instinct (MI300X, MI355X).
MAMF_GPUS: tuple[str, ...] = ("B200", "GB200", "MI300X", "MI355X")
#: The dtypes of the MAMF table, as the page names them.
_WORDS = {"bfloat16": "BF16", "float8": "FP8"}
_COLUMNS = {"source", "device", "dtype", "tflops_best", "M", "N", "K"}


def _mamf(frame) -> pd.DataFrame | None:
    frame = frame_or_none("frame", frame)
    if frame is None:
        return None
    missing = _COLUMNS - set(frame.columns)
    if missing:
        raise ValueError(f"frame lacks the columns {sorted(missing)} of pk.published('mamf_newest')")
    return frame


def _gpus(gpus: Sequence[str]) -> list[str]:
    if isinstance(gpus, str) or not all(isinstance(g, str) for g in gpus) or not gpus:
        raise TypeError(f"gpus must be a non-empty list of perfkit GPU names such as {list(MAMF_GPUS)}, "
                        f"got {gpus!r}")
    return [device_spec(g).name for g in gpus]  # LookupError naming an unknown GPU


def mamf_rows(frame: pd.DataFrame | None, gpus: Sequence[str] = MAMF_GPUS,
              dtypes: Sequence[str] = ("bfloat16", "float8")) -> pd.DataFrame | None:
    """The MAMF rows of ``gpus`` (perfkit names) and ``dtypes`` that have a value, in the order
    asked, with ``dtype`` canonical, ``peak_tflops`` (the dense datasheet peak of that GPU and
    dtype) and ``fraction`` (best ÷ peak). The metadata is kept, its device list narrowed to the
    GPUs shown. None in, None out."""
    frame = _mamf(frame)
    if frame is None:
        return None
    names, wanted = _gpus(gpus), [canonical_dtype(d) for d in dtypes]
    f = frame.assign(dtype=frame["dtype"].map(canonical_dtype))
    f = f[f["device"].isin(names) & f["dtype"].isin(wanted) & f["tflops_best"].notna()].copy()
    f["peak_tflops"] = [device_spec(g).peak_flop_s(d) / 1e12 for g, d in zip(f["device"], f["dtype"])]
    f["fraction"] = f["tflops_best"] / f["peak_tflops"]
    f = f.sort_values(["device", "dtype"], key=lambda c: c.map({**{n: i for i, n in enumerate(names)},
                                                                  **{d: i for i, d in enumerate(wanted)}}))
    out = f.reset_index(drop=True)
    shown = [g for g in names if g in set(out["device"])]
    out.attrs["meta"] = {**dict(frame.attrs.get("meta") or {}), "device_name": ", ".join(shown)}
    return out


def caption_of(rows: pd.DataFrame, *, caveat: bool = True) -> str:
    """Who measured ``rows`` (a frame from :func:`mamf_rows` or :func:`achievable_table`), on
    which GPUs, and how they timed: the caption of a table of them; ``caveat`` adds the first
    sentence of the publisher's caveat (what the rows compare)."""
    if frame_or_none("rows", rows) is None:
        raise TypeError("rows must be a frame of the published MAMF table, got None")
    label, _ = published_label(rows, None)
    said = FrameMeta.of(rows).caveat if caveat else None
    return f"{label}. {said.split('. ')[0].rstrip('.')}." if said else label

