"""Interactive explorers for the book (ipywidgets). Thin: the numbers come from
:mod:`perfkit.roofline`, :mod:`perfkit.quantization` and :mod:`perfkit.gemm_model`, the figures
from :mod:`perfkit.plots`.

Each widget draws its initial state when it is built (its figure is a PNG held in an ``Output``
widget), so a statically rendered page still shows a figure.
"""

from __future__ import annotations

import base64
import html
import io
from typing import Any, Callable

import ipywidgets as widgets
from matplotlib.figure import Figure

from ..devices import DeviceSpec, resolve_spec
from ..dtypes import DTYPES, canonical_dtype, itemsize
from ..gemm_model import CANDIDATE_TILES, explain_gemm
from ..provenance import modelled
from ..roofline import gemm_operation, roofline_time
from ..units import TERA, format_time
from .background.figures import plot_roofline, plot_tile_waves
from .figures import new_figure

__all__ = ["gemm_explorer", "roofline_explorer"]

MAX_DIM = 65536


def _pick_dtype(wanted: Any, available: list[str], name: str = "dtype") -> str:
    """``wanted`` if available, else the available dtype closest in size (first in DTYPES order)."""
    if not available:
        raise LookupError(f"no dtype has a peak on every device, so {name} has no choices")
    wanted = canonical_dtype(wanted)
    if wanted in available:
        return wanted
    return min(available, key=lambda d: abs(itemsize(d) - itemsize(wanted)))


def _dim(description: str, value: int) -> widgets.BoundedIntText:
    return widgets.BoundedIntText(value=value, min=1, max=MAX_DIM, description=description,
                                  layout=widgets.Layout(width="150px"), style={"description_width": "20px"})


def _show_figure(out: widgets.Output, fig: Figure, alt: str) -> None:
    """Replace ``out``'s content by ``fig`` as a PNG with ``alt`` text (works with or without a
    running kernel: the HTML form carries the alt text, the PNG is its fallback)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96)
    png = base64.b64encode(buf.getvalue()).decode("ascii")
    out.outputs = ({
        "output_type": "display_data",
        "data": {"text/html": f'<img alt="{html.escape(alt, quote=True)}" src="data:image/png;base64,{png}">',
                 "image/png": png, "text/plain": alt},
        "metadata": {},
    },)


def roofline_explorer(spec: DeviceSpec | str | None = None, reference: DeviceSpec | str = "H100-SXM",
                      dtype: Any = "float16") -> widgets.Widget:
    """M, N, K and dtype controls moving a GEMM along the rooflines of ``spec`` and ``reference``.

    ``spec`` defaults to :func:`~perfkit.devices.current_device`. The dtype menu lists only dtypes
    both devices have a peak for; an unavailable ``dtype`` falls back to the closest in size.
    """
    spec, ref = resolve_spec(spec), resolve_spec(reference, param="reference")
    specs = [spec] if ref == spec else [spec, ref]
    common = [d for d in DTYPES if all(d in s.peaks for s in specs)]
    m, n, k = _dim("M", 8192), _dim("N", 128), _dim("K", 8192)
    dd = widgets.Dropdown(options=common, value=_pick_dtype(dtype, common), description="dtype",
                          layout=widgets.Layout(width="200px"))
    text, out = widgets.HTML(), widgets.Output()

    def update(*_):
        op = gemm_operation(m.value, n.value, k.value, dd.value)
        lines = [f"<b>{html.escape(op.name)}</b>, {dd.value}: intensity {op.intensity:,.1f} FLOP/B"]
        for s in specs:
            t, bound = roofline_time(op.flops, op.bytes, s, dd.value)
            lines.append(f"{html.escape(s.label)}: {bound}-bound (ops:byte {s.ops_per_byte(dd.value):,.0f}), "
                         f"roofline time {format_time(t)}")
        text.value = "<br>".join(lines)
        ax = new_figure(height=4.8)[1][0, 0]
        alt = (f"Roofline of {', '.join(s.label for s in specs)} in {dd.value}, attainable FLOP/s against "
               f"arithmetic intensity, with {op.name} at {op.intensity:,.1f} FLOP/B")
        _show_figure(out, plot_roofline([op], specs, dd.value, ax=ax), alt)

    for w in (m, n, k, dd):
        w.observe(update, names="value")
    update()
    return widgets.VBox([widgets.HBox([m, n, k, dd]), text, out])


def gemm_explorer(spec: DeviceSpec | str | None = None,
                  measure: Callable[[int, int, int, str], float] | None = None) -> widgets.Widget:
    """M, N, K, dtype and tile controls showing :func:`~perfkit.gemm_model.explain_gemm`'s prediction.

    ``measure(M, N, K, dtype) -> seconds``, if given, is called on every change and its time is
    shown beside the model's, with the model error.
    """
    spec = resolve_spec(spec)
    if measure is not None and not callable(measure):
        raise TypeError(f"measure must be a callable (M, N, K, dtype) -> seconds, or None, got {measure!r}")
    dtypes = [d for d in DTYPES if d in spec.peaks]
    m, n, k = _dim("M", 2304), _dim("N", 1536), _dim("K", 4096)
    dd = widgets.Dropdown(options=dtypes, value=_pick_dtype("float16", dtypes), description="dtype",
                          layout=widgets.Layout(width="200px"))
    tiles = {"auto": None} | {f"{a}×{b}": (a, b) for a, b in CANDIDATE_TILES}
    td = widgets.Dropdown(options=list(tiles), value="auto", description="tile",
                          layout=widgets.Layout(width="200px"))
    text, out = widgets.HTML(), widgets.Output()

    def update(*_):
        p = explain_gemm(m.value, n.value, k.value, dd.value, spec, tiles[td.value])
        rows = [
            ("tile", f"{p.tile[0]}×{p.tile[1]}" + (" (chosen by the model)" if td.value == "auto" else "")),
            ("tiles / waves", f"{p.tiles} tiles in {p.waves} wave(s) of {spec.sms}"),
            ("wave utilization", f"{p.utilization:.1%}"),
            ("tile efficiency", f"{p.tile_efficiency:.1%} of launched tile work is useful"),
            ("tile-shape factor (modelling assumption)", f"{p.shape_factor:.2f}"),
            ("roofline floor", format_time(p.floor_s)),
            ("predicted", f"{format_time(p.predicted_s)} ({p.bound}-bound, {p.achieved_flop_s / TERA:,.1f} TFLOP/s)"),
            ("aligned", "yes" if p.aligned else "no (dimensions not multiples of 16 bytes)"),
        ]
        if measure is not None:
            try:
                t = float(measure(m.value, n.value, k.value, dd.value))
                rows.append(("measured", f"{format_time(t)}; model error {p.predicted_s / t - 1:+.1%}"))
            except Exception as e:  # show, don't break the widget
                rows.append(("measured", f"failed: {type(e).__name__}: {e}"))
        text.value = "<table>" + "".join(
            f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td></tr>" for a, b in rows) + "</table>"
        ax = new_figure(height=5.5, width=6.5)[1][0, 0]
        alt = (f"The {p.M}×{p.N} output of the GEMM cut into {p.tile[0]}×{p.tile[1]} tiles, coloured by the "
               f"wave that runs them on {spec.sms} SMs: {p.tiles} tiles in {p.waves} wave(s)")
        _show_figure(out, plot_tile_waves(p.M, p.N, p.tile, spec.sms, ax=ax, source=modelled(spec)), alt)

    for w in (m, n, k, dd, td):
        w.observe(update, names="value")
    update()
    return widgets.VBox([widgets.HBox([m, n, k, dd, td]), text, out])
