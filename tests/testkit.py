"""What many tests need, in one place: the repository's paths, the devices they use, frames with metadata.

``from testkit import REPO, H100, framed, H100_RECORDED`` (``tests/`` is on ``sys.path``: pytest's
``pythonpath`` setting). A frame's metadata here is the plain dict perfkit's writers put in
``frame.attrs["meta"]`` (see :mod:`perfkit.meta`): a recording on a GPU, a live CPU run, a published table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from perfkit.devices import device_spec

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "perfkit"
CHAPTERS = REPO / "chapters"
SCRIPTS = REPO / "scripts"
DATA = REPO / "data"

#: The datasheets tests model with.
H100 = device_spec("H100-SXM")
V100 = device_spec("V100-SXM2")
A100 = device_spec("A100-SXM4-80GB")
#: What the driver calls an H100 (a recording's ``device_name``).
H100_NAME = "NVIDIA H100 80GB HBM3"

#: A complete recording made on an H100, and the label perfkit.provenance gives it.
H100_RECORDED: Mapping[str, Any] = {"device_name": H100_NAME, "recorded_at": "2026-11-20T10:00:00+00:00",
                                    "complete": True}
RECORDED_LABEL = "recorded on NVIDIA H100 80GB HBM3 on 2026-11-20"
#: How provenance.published_counterparts names DeepBench's V100 table.
V100_PUBLISHED = "V100-SXM2, 2019"
#: A live run on a CPU.
CPU_LIVE: Mapping[str, Any] = {"live": True, "device_name": "AMD EPYC 7B13", "measured_at": "2026-11-22T08:00:00+00:00"}


def framed(data: Any, meta: Mapping[str, Any] | None = None, **fields: Any) -> pd.DataFrame:
    """A frame of ``data`` (a DataFrame, copied; rows; or columns) whose ``attrs["meta"]`` is ``meta``
    (a fresh dict) updated with ``fields``."""
    frame = data.copy() if isinstance(data, pd.DataFrame) else pd.DataFrame(data)
    frame.attrs["meta"] = {**(meta or {}), **fields}
    return frame


def heading_text(target: Any) -> str:
    """Everything a figure (or one Axes) says of itself: its suptitle, its Axes' titles, and the
    caption under it (what it rests on, its wrapped lines joined), one per line. For an interactive
    figure (or its Plotly figure): its title and the source footnote under it (HTML-escaped, as the
    page has them; the footnote's lines joined)."""
    from matplotlib.axes import Axes

    from perfkit.book.figures import caption_text
    from perfkit.book.interactive import InteractiveFigure, footnote_of

    if isinstance(target, InteractiveFigure) or hasattr(target, "to_plotly_json"):
        figure = target.figure if isinstance(target, InteractiveFigure) else target
        note = footnote_of(figure).replace("<br>", " ")  # its lines joined: a source split over two is whole
        return "\n".join(p for p in (figure.layout.title.text or "", note) if p)
    fig = target.figure if isinstance(target, Axes) else target
    axes = [target] if isinstance(target, Axes) else fig.axes
    parts = [fig._suptitle.get_text()] if fig._suptitle is not None and not isinstance(target, Axes) else []
    parts += [ax.get_title() for ax in axes]
    captions = getattr(fig, "captions", [])
    if isinstance(target, Axes):
        title = target.get_title()
        captions = [c for c in captions if c[0] == title] or captions
    parts.append(" ".join(caption_text(captions).split("\n")))  # its lines joined, as the text it wraps
    return "\n".join(p for p in parts if p)
