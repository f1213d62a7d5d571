"""Fused against eager memory-bound kernels on AMD's MI355X: HipKittens' published benchmarks.

Pure functions of ``pk.published("hipkittens")`` (Hazy Research's HipKittens against AITER,
``torch.compile`` and eager PyTorch, ROCm 7.0 preview): its layer norm (dropout + residual add +
LayerNorm, batch 16, width 2048) and rotary embedding (16 heads of 128) over sequence lengths.
:func:`bandwidth` gives each library's GB/s at the largest length (the least cache-resident:
MI355X has a 256 MB Infinity Cache) from the table's lower-bound byte count (inputs read once,
outputs written once) and the time, and its share of the datasheet bandwidth (the chapter quotes
them, saying who measured and how). Units: GB/s (10⁹ bytes/s), fractions of ``DeviceSpec.mem_bandwidth``.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from ..._validate import frame_or_none
from ...devices import device_spec

__all__ = ["KERNELS", "LIBRARIES", "bandwidth"]

#: HipKittens' memory-bound kernels, and what they compute.
KERNELS: dict[str, str] = {"layernorm": "dropout + add + layer norm", "rotary": "rotary embedding"}
#: The libraries timed, fused first, and their names.
LIBRARIES: dict[str, str] = {"hipkittens": "HipKittens", "aiter": "AITER", "torch_compile": "torch.compile",
                             "torch_eager": "eager PyTorch"}
_COLUMNS = {"device", "op", "library", "seq", "time_s", "io_bytes_min"}


def bandwidth(frame: pd.DataFrame | None, gpu: str = "MI355X",
              kernels: Sequence[str] = tuple(KERNELS)) -> pd.DataFrame | None:
    """Per kernel and library on ``gpu``, at the kernel's largest sequence length: ``bytes``
    (lower bound), ``time_s``, ``gbps`` and ``fraction`` of the datasheet bandwidth. None without
    the table or rows for ``gpu``."""
    frame = frame_or_none("frame", frame)
    if frame is None:
        return None
    if missing := _COLUMNS - set(frame.columns):
        raise ValueError(f"frame lacks the columns {sorted(missing)} of pk.published('hipkittens')")
    if isinstance(kernels, str) or not set(kernels) <= set(KERNELS):
        raise ValueError(f"kernels must be a list of {list(KERNELS)}, got {kernels!r}")
    spec = device_spec(gpu)
    f = frame[(frame["device"] == spec.name) & frame["op"].isin(list(kernels))]
    if not len(f):
        return None
    f = f[f["seq"] == f.groupby("op")["seq"].transform("max")]
    out = pd.DataFrame({"op": f["op"], "library": f["library"], "seq": f["seq"].astype(int),
                        "bytes": f["io_bytes_min"], "time_s": f["time_s"]})
    out["gbps"] = out["bytes"] / out["time_s"] / 1e9
    out["fraction"] = out["gbps"] * 1e9 / spec.mem_bandwidth
    rank = {k: i for i, k in enumerate(list(kernels) + list(LIBRARIES))}
    out = out.sort_values(["op", "library"], key=lambda c: c.map(rank)).reset_index(drop=True)
    out.attrs["meta"] = {**dict(frame.attrs.get("meta") or {}), "device_name": spec.name}
    return out
