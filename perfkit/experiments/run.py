"""``run_or_load``: a chapter's numbers measured live where this machine can, else the recording in ``data/``."""

from __future__ import annotations

import os

import pandas as pd

from ..data import load
from ..provenance import Source, missing, source_of
from .registry import get, missing_needs

__all__ = ["run_or_load"]


def run_or_load(name: str, *, device: str | None = None, **kwargs) -> tuple[pd.DataFrame | None, Source]:
    """Measure experiment ``name`` live when this machine can, else load its recording.

    Returns ``(frame, source)``: a live frame, a recorded one (``device`` picks a recording by slug
    or name), or ``(None, missing(...))`` saying that no recording exists yet. Extra keyword
    arguments go to the experiment. With ``PERFKIT_QUICK=1`` live runs use the quick sweeps and
    their label says so.
    """
    exp = get(name)
    lacking = missing_needs(exp)
    if not lacking:
        if os.environ.get("PERFKIT_QUICK", "") == "1":
            kwargs.setdefault("quick", True)
        frame = exp(**kwargs)
        return frame, source_of(frame)
    try:
        frame = load(name, device=device)
    except LookupError:
        return None, missing(f"no GPU here ({', '.join(lacking)} missing) and no recording of {name!r} in "
                             f"data/ yet: run `python -m perfkit record {name}` on a GPU to make one")
    return frame, source_of(frame)
