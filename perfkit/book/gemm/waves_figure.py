"""A tiled GEMM's waves (chapter 2, section 5): the tiles of an M×N output coloured by the wave
they run in on a GPU's SMs, the partial last wave hatched (:func:`plot_gemm_waves`)."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from ..._validate import positive_number
from ...devices import DeviceSpec, resolve_spec
from ...provenance import modelled
from ...quantization import cdiv, wave_quantization
from ..background.figures import plot_tile_waves
from ..figures import MIN_FONT_PT, book_figure, heading, new_figure

__all__ = ["plot_gemm_waves"]


@book_figure
def plot_gemm_waves(M: int, N: int, tile: tuple[int, int], spec: DeviceSpec | str, *, blocks_per_sm: int = 1,
                    height: float = 3.4) -> Figure:
    """The tiles of an M×N GEMM output coloured by the wave they run in on ``spec``'s SMs.

    :func:`perfkit.book.background.figures.plot_tile_waves` on a short figure (``height`` inches),
    with the tiles of a partial last wave hatched, a legend, and a title giving the tiles, the
    waves and the share of the SMs the last wave keeps busy. Captioned as a model of ``spec`` (a
    GPU's name or :class:`~perfkit.devices.DeviceSpec` with a known SM count).
    """
    spec = resolve_spec(spec, none_ok=False)
    if not spec.sms:
        raise ValueError(f"spec must be a GPU with a known SM count, got {spec.label} ({spec.kind})")
    height = positive_number("height", height)
    wq = wave_quantization(M, N, tile, spec.sms, blocks_per_sm)
    fig, axes = new_figure(height=height)
    ax = axes[0, 0]
    plot_tile_waves(M, N, tile, spec.sms, blocks_per_sm=blocks_per_sm, ax=ax, source=modelled(spec))
    tm, tn = wq.tile
    cols = cdiv(wq.N, tn)
    handles = [Patch(fc=f"C{w % 10}", alpha=0.6, label=f"wave {w + 1}") for w in range(min(wq.waves, 8))]
    if wq.last_wave_tiles < wq.wave_size:  # a partial last wave: its tiles hatched
        for i in range((wq.waves - 1) * wq.wave_size, wq.tiles):
            r, c = divmod(i, cols)
            ax.add_patch(Rectangle((c * tn, r * tm), tn, tm, fill=False, hatch="///", ec="C3", lw=0))
        handles.append(Patch(fc="none", hatch="///", ec="C3", lw=0, label="partial last wave"))
    handles.append(Line2D([], [], color="black", lw=2, label=f"useful {wq.M}×{wq.N} output"))
    ax.legend(handles=handles, fontsize=MIN_FONT_PT, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    busy = wq.last_wave_tiles / wq.wave_size
    slots = f"{wq.blocks_per_sm} per SM" if wq.blocks_per_sm > 1 else "one per SM"
    fig.captions = [c for c in fig.captions if c[0] != ax.get_title()]  # the title below replaces it
    heading(ax, f"{wq.tiles} tiles of {tm}×{tn} in {wq.waves} wave{'s' * (wq.waves != 1)} of {wq.wave_size} "
                f"({slots}): last wave {wq.last_wave_tiles} tiles ({busy:.0%} busy), "
                f"{wq.utilization:.1%} of the SM-time useful", modelled(spec))
    return fig
