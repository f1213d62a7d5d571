"""The newest GPUs side by side ("next": Blackwell and AMD Instinct), for the background chapter.

:func:`newest_table` sets each GPU's datasheet beside the best GEMM a third party measured on it:
its multiprocessors (SMs, or CUs spread over dies on AMD), the threads of a warp (a wavefront on
AMD), its caches, its dense BF16 peak and ridge point, and the best BF16 GEMM of ml-engineering's
MAMF table (:mod:`perfkit.book.gemm.newest`). :func:`show_newest` shows it captioned with where each column
comes from; without the published table it shows the datasheet columns and a note saying how to
get the rest. Units: TFLOP/s, FLOP per byte, MiB (2²⁰ bytes).
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from ...devices import DeviceSpec, device_spec
from ...display import Table, show, table
from ...provenance import caption
from ...published_data.notes import published_absent
from ..gemm.newest import caption_of, mamf_rows

__all__ = ["NEXT_GPUS", "newest_table", "ridge", "show_newest"]

#: The newest GPUs the chapter compares: one Blackwell, two AMD Instinct generations (CDNA 3, CDNA 4).
NEXT_GPUS: tuple[str, ...] = ("B200", "MI300X", "MI355X")
_MIB = 2**20


def _spec(gpu: str | DeviceSpec) -> DeviceSpec:
    return gpu if isinstance(gpu, DeviceSpec) else device_spec(gpu)


def ridge(gpu: str | DeviceSpec, dtype: str = "bfloat16") -> float:
    """The ridge point of ``gpu`` (a name or spec) in ``dtype``: dense peak ÷ bandwidth, FLOP/byte."""
    return _spec(gpu).ops_per_byte(dtype)


def _units(s: DeviceSpec) -> str:
    return f"{s.sms} {s.unit_name}" + (f", {s.dies} dies" if s.dies > 1 else "")


def _caches(s: DeviceSpec) -> str:
    l2 = f"{s.l2_bytes / _MIB:,.0f}" if s.l2_bytes else "?"
    return l2 + (f" + {s.llc_bytes / _MIB:,.0f}" if s.llc_bytes else "")


def newest_table(mamf: pd.DataFrame | None, gpus: Sequence[str | DeviceSpec] = NEXT_GPUS) -> pd.DataFrame:
    """One row per GPU: its units (SMs, or CUs and dies), warp width, caches (MiB: L2, + the cache
    behind it), dense BF16 peak (TFLOP/s), BF16 ridge (FLOP/byte), and, where ``mamf``
    (``pk.published("mamf_newest")``) has it, the best BF16 GEMM and its share of the peak. Without ``mamf`` (None) the last column is left out."""
    if isinstance(gpus, (str, DeviceSpec)) or not gpus:
        raise TypeError(f"gpus must be a non-empty list of GPU names or specs, such as {list(NEXT_GPUS)}, "
                        f"got {gpus!r}")
    specs = [_spec(g) for g in gpus]
    best = mamf_rows(mamf, [s.name for s in specs], ["bfloat16"])
    by_gpu = {} if best is None else dict(zip(best["device"], zip(best["tflops_best"], best["fraction"])))
    rows = []
    for s in specs:
        row = {"GPU": s.name, "units": _units(s), "warp": s.warp_size, "caches (MiB)": _caches(s),
               "BF16 TFLOP/s": f"{s.peak_flop_s('bfloat16') / 1e12:,.0f}", "ridge": f"{ridge(s):,.0f}"}
        if best is not None:
            got = by_gpu.get(s.name)
            row["best GEMM"] = f"{got[0]:,.0f} ({got[1]:.0%})" if got else "—"
        rows.append(row)
    out = pd.DataFrame(rows)
    if best is not None:
        out.attrs["meta"] = best.attrs["meta"]
    return out


def show_newest(mamf: pd.DataFrame | None, gpus: Sequence[str | DeviceSpec] = NEXT_GPUS) -> Table:
    """:func:`newest_table`, captioned with where each column comes from: the datasheets, and who
    measured the best GEMM and how. Without ``mamf``, shows the note saying how to get it first."""
    shown = newest_table(mamf, gpus)
    datasheets = "datasheets (dense peaks; ridges in FLOP/byte)"
    if "best GEMM" not in shown:
        show(published_absent(instead="the datasheet columns alone, below"))
        return table(shown, caption=datasheets[:1].upper() + datasheets[1:])
    best = caption_of(shown, caveat=False)
    return table(shown, caption=caption({"best GEMM (BF16)": best, "the rest": datasheets}))
