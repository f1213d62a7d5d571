"""The GPU-background chapter's experiment: waves and the tail effect, with a real launch sweep."""

from __future__ import annotations

import pandas as pd

from ..._validate import positive_int
from ...kernels import spin_blocks_per_sm, spin_launcher
from ...placement import measured_on, resolve_device, timer
from ...quantization import cdiv
from ...experiments.measure import sweep, timing_row
from ...experiments.registry import register

__all__ = ["per_wave", "waves"]


@register("waves", "Duration of a launch of B identical blocks (each spins for a fixed time) as B crosses "
          "multiples of the GPU's resident-block capacity: one step per wave (NVIDIA GPU background, Figure 3)",
          {"blocks": "thread blocks launched", "wave_size": "blocks resident at once = SMs × blocks per SM",
           "sms": "streaming multiprocessors", "blocks_per_sm": "co-resident blocks of this kernel per SM",
           "waves": "ceil(blocks / wave_size)", "time_s": "median launch duration, seconds",
           "iqr_s": "inter-quartile range, seconds"},
          needs=("cuda", "cupy"))
def waves(*, max_waves: int = 4, spin_cycles: int = 100_000, device="auto", quick=False, progress=True,
          on_row=None) -> pd.DataFrame:
    """Launch k·wave + r blocks of a CuPy spin kernel for k < ``max_waves`` and several r.

    Every block busy-waits ``spin_cycles`` SM clock cycles, so a launch lasts about
    ``waves × (spin time)``: flat within a wave, one step each time a wave fills up.
    """
    max_waves, spin_cycles = positive_int("max_waves", max_waves), positive_int("spin_cycles", spin_cycles)
    device = resolve_device(device)
    if device != "cuda":
        raise RuntimeError("the waves experiment launches a CuPy kernel and needs an NVIDIA GPU; "
                           "on a CPU, show the recorded data (perfkit.data.load('waves')) instead")
    spec = measured_on()
    bps = spin_blocks_per_sm()
    wave = spec.sms * bps
    if quick:
        max_waves = 2
    offsets = sorted({0, 1, wave // 4, wave // 2, 3 * wave // 4, wave - 1})
    blocks = sorted({k * wave + r for k in range(max_waves) for r in offsets if k * wave + r > 0} | {max_waves * wave})

    def measure(b):
        m = timer(spin_launcher(b, spin_cycles=spin_cycles), device=device, flush_l2=False,
                  label=f"spin kernel, {b} blocks")
        return {"blocks": b, "wave_size": wave, "sms": spec.sms, "blocks_per_sm": bps, "waves": cdiv(b, wave),
                **timing_row(m)}

    return sweep(blocks, measure, on_row=on_row, progress=progress, desc="waves")


def per_wave(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """The ``waves`` sweep summarised per number of waves, ready for :func:`perfkit.table`.

    One row per wave count: ``waves``, the median launch time over its launches in seconds
    (``"median_time_s"``; show it with ``pk.table(..., seconds={"median_time_s": "µs"})``) and
    the step up from the previous wave count in units of the one-wave time
    (``"step (one-wave times)"``, NaN on the first row): about 1 when each wave costs one more
    wave of time. Pure: None (or an empty frame) in → None out, so that
    ``pk.table(per_wave(waves), source, instead=...)`` shows a note where nothing was measured.
    """
    if frame is None or not len(frame):
        return None
    median = frame.groupby("waves")["time_s"].median().sort_index()
    return pd.DataFrame({"waves": median.index.astype(int),
                         "median_time_s": median.to_numpy(),
                         "step (one-wave times)": (median.diff() / median.iloc[0]).to_numpy()})
