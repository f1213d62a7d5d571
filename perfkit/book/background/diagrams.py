"""A diagram of a GPU drawn from its :class:`~perfkit.devices.DeviceSpec`: a row of SMs, one of them
expanded into its four sub-partitions, the L2 cache they share and the HBM behind it.

Every number in the drawing (SM count, L2 size, memory size and bandwidth, dense peaks, the ridge
point) is read from the spec it is given; what the spec does not hold (register file and L1 sizes,
which vary between architectures) is named, not sized. Units: bytes, bytes/s, FLOP/s.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.patches import ConnectionPatch, FancyArrowPatch, FancyBboxPatch

from ...devices import DeviceSpec, device_spec
from ...units import GIGA, MiB, TERA
from ..figures import MIN_FONT_PT, BookFigure, heading, new_figure

__all__ = ["plot_gpu"]

#: Drawing units: the axes span WIDTH × HEIGHT units, in the figure's own aspect (7.5 × 4.4 in).
_W, _H = 150.0, 88.0
#: SM boxes drawn in the row before the ellipsis (the last SM is drawn after it, expanded).
_SHOWN = 6
_COLOURS = {"chip": "#f4f6fb", "sm": "#c9daf8", "l2": "#fde2b6", "hbm": "#d9ead3", "sub": "#ffffff",
            "l1": "#fde2b6"}


def _box(ax: Axes, x: float, y: float, w: float, h: float, colour: str, text: str = "", *,
         size: float = MIN_FONT_PT, weight: str = "normal", lw: float = 1.0) -> None:
    """A rounded box with ``text`` centred in it (drawing units)."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=1.2", fc=colour,
                                ec="0.25", lw=lw))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, weight=weight)


def _peak(spec: DeviceSpec, dtype: str) -> float | None:
    """``spec``'s dense peak for ``dtype`` (FLOP/s), None when it has none."""
    return spec.peaks.get(dtype)


def _sources(spec: DeviceSpec) -> str:
    """Where the spec's numbers come from, each source said once."""
    keys = ("sms", "l2_bytes", "memory_bytes", "mem_bandwidth", "peaks")
    said = list(dict.fromkeys(spec.sources[k] for k in keys if spec.sources.get(k)))
    return "; ".join(said) or "sources unknown"


def _gpu_spec(spec: DeviceSpec | None) -> DeviceSpec:
    if spec is None:
        return device_spec("H100-SXM")
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a DeviceSpec (pk.device_spec('A100-SXM4-80GB')), got {spec!r}")
    if spec.kind != "gpu" or not spec.sms:
        raise ValueError(f"spec must be a GPU with a known SM count, got {spec.name} ({spec.kind})")
    return spec


def _chip(ax: Axes, spec: DeviceSpec, tensor: str) -> tuple[float, float, float, float]:
    """The chip: its peaks, the row of SMs and the L2. Returns the box of the last SM (x, y, w, h)."""
    sms = spec.sms
    _box(ax, 2, 19, 88, 65, _COLOURS["chip"], lw=1.4)
    ax.text(5, 80.5, f"GPU chip: {spec.name}", fontsize=9.5, weight="bold", va="top")
    t, f = _peak(spec, tensor), _peak(spec, "float32")
    lines = [f"{sms} streaming multiprocessors (SMs)"
             + (f", each {t / sms / TERA:.2g} TFLOP/s {tensor}" if t is not None else "")]
    if t is not None:
        lines.append(f"all SMs: {t / TERA:,.0f} TFLOP/s {tensor} (Tensor Cores)"
                     + (f", {f / TERA:,.1f} float32" if f is not None else ""))
    ax.text(5, 75, "\n".join(lines), fontsize=MIN_FONT_PT, va="top", linespacing=1.35)
    w, gap, y, h = 8.6, 1.7, 49.0, 12.0
    shown = min(_SHOWN, sms - 1)
    for i in range(shown):
        _box(ax, 6 + i * (w + gap), y, w, h, _COLOURS["sm"], f"SM\n{i}", size=MIN_FONT_PT)
    x_last = 6 + shown * (w + gap) + (7.0 if sms - 1 > shown else 0.0)
    if sms - 1 > shown:
        ax.text(x_last - 3.6, y + h / 2, "…", ha="center", va="center", fontsize=11)
    _box(ax, x_last, y, w, h, _COLOURS["sm"], f"SM\n{sms - 1}", size=MIN_FONT_PT, lw=1.8)
    l2 = f"L2 cache: {spec.l2_bytes / MiB:,.0f} MiB" if spec.l2_bytes else "L2 cache (size unknown)"
    _box(ax, 6, 23, 80, 13, _COLOURS["l2"], f"{l2}, shared by all {sms} SMs", size=MIN_FONT_PT)
    for i in sorted({0, shown - 1}) if shown else ():
        x = 6 + i * (w + gap) + w / 2
        ax.add_patch(FancyArrowPatch((x, 36), (x, y), arrowstyle="<->", mutation_scale=7, lw=0.8, color="0.3"))
    ax.add_patch(FancyArrowPatch((x_last + w / 2, 36), (x_last + w / 2, y), arrowstyle="<->", mutation_scale=7,
                                 lw=0.8, color="0.3"))
    return x_last, y, w, h


def _memory(ax: Axes, spec: DeviceSpec, tensor: str) -> None:
    """The HBM under the chip, the bandwidth between them and the ridge point it sets."""
    size = f"{spec.memory_bytes / GIGA:,.0f} GB" if spec.memory_bytes else "size unknown"
    _box(ax, 6, 1.5, 80, 10, _COLOURS["hbm"], f"device memory (HBM or GDDR DRAM): {size}", size=MIN_FONT_PT)
    ax.add_patch(FancyArrowPatch((46, 11.5), (46, 23), arrowstyle="<->", mutation_scale=10, lw=1.6, color="0.15"))
    if spec.mem_bandwidth:
        ax.text(44, 15.2, f"{spec.mem_bandwidth / TERA:.3g} TB/s", fontsize=MIN_FONT_PT, va="center", ha="right",
                weight="bold")
    if spec.mem_bandwidth and _peak(spec, tensor) is not None:
        ax.text(48, 15.2, f"ridge: {spec.ops_per_byte(tensor):,.0f} FLOP/byte ({tensor})", fontsize=MIN_FONT_PT,
                va="center")


def _sm(ax: Axes, spec: DeviceSpec, tensor: str, last: tuple[float, float, float, float]) -> None:
    """One SM, expanded: four sub-partitions (warp scheduler, CUDA cores, Tensor Core, registers)
    above the L1 cache / shared memory, with zoom lines from the SM it expands."""
    x0, y0, w0, h0 = 96.0, 2.0, 52.0, 82.0
    _box(ax, x0, y0, w0, h0, _COLOURS["chip"], lw=1.8)
    ax.text(x0 + 2.5, y0 + h0 - 3.5, f"SM {spec.sms - 1}, expanded", fontsize=9.5, weight="bold", va="top")
    ax.text(x0 + 2.5, y0 + h0 - 8.8, "4 sub-partitions, each with:", fontsize=MIN_FONT_PT, va="top")
    parts = "warp scheduler\nCUDA cores\nTensor Core\nregisters"  # what each does: the chapter's text
    bw, bh = (w0 - 7.5) / 2, 24.0
    for row in range(2):
        for col in range(2):
            _box(ax, x0 + 2.5 + col * (bw + 2.5), y0 + 18 + row * (bh + 2.5), bw, bh, _COLOURS["sub"],
                 parts, size=MIN_FONT_PT)
    _box(ax, x0 + 2.5, y0 + 3, w0 - 5, 12, _COLOURS["l1"], "L1 cache / shared memory\n(per SM)", size=MIN_FONT_PT)
    xl, yl, wl, hl = last
    for (xa, ya), (xb, yb) in (((xl + wl, yl + hl), (x0, y0 + h0)), ((xl + wl, yl), (x0, y0))):
        ax.add_artist(ConnectionPatch((xa, ya), (xb, yb), "data", "data", color="0.45", lw=0.8, ls="--"))


def plot_gpu(spec: DeviceSpec | None = None, *, tensor_dtype: str = "float16") -> BookFigure:
    """A labelled diagram of ``spec`` (default: ``pk.device_spec("H100-SXM")``), 7.5 inches wide.

    Left, the chip: a row of SM boxes (the count, ``spec.sms``, and the dense ``tensor_dtype`` and
    float32 peaks, in TFLOP/s, all SMs together and per SM), the L2 cache they share
    (``spec.l2_bytes``), and below it the HBM (``spec.memory_bytes``) with the bandwidth between
    them (``spec.mem_bandwidth``, TB/s) and the ridge point it sets (FLOP/byte). Right, the last SM
    expanded: four sub-partitions, each a warp scheduler, CUDA cores, a Tensor Core and registers,
    above the L1 cache / shared memory. The caption says it is a diagram and names the spec's sources.
    ``TypeError`` for a ``spec`` that is no DeviceSpec; ``ValueError`` for a CPU or an unknown SM count.
    """
    spec = _gpu_spec(spec)
    fig, axes = new_figure(height=4.4)
    ax = axes[0, 0]
    ax.set_xlim(0, _W)
    ax.set_ylim(0, _H)
    ax.set_axis_off()
    last = _chip(ax, spec, tensor_dtype)
    _memory(ax, spec, tensor_dtype)
    _sm(ax, spec, tensor_dtype, last)
    heading(fig, f"Inside a GPU: the {spec.name}'s {spec.sms} SMs share one L2 cache and the memory behind it",
            f"a diagram, not to scale; its numbers are the spec's ({_sources(spec)})")
    return fig
