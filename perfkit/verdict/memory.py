"""The verdicts of chapter 06_memory_limited, computed from the frames the chapter shows.

The frames, by experiment name (:data:`EXPERIMENTS`): ``activation_sizes``, ``batchnorm_sizes``,
``pool_sizes``, ``fusion_chains``, ``convnet_breakdown`` and ``ceiling_copy`` (the copy ceiling the
bandwidths are compared with; without it, the achievable bandwidth of the GPU the frames were
measured on). A frame measured on a CPU is never used: its rule shows "no data yet". No published
benchmark of these layers exists, so every "then" is empty. Bandwidths in bytes/s.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import pandas as pd

from ._core import Finding, finding
from ._frames import gpu_rows, recorded, spec_of

TITLE = "Memory-limited layers"
CHAPTER = "06_memory_limited"

#: The experiments whose frames :func:`findings` reads (keys of its ``frames``).
EXPERIMENTS: tuple[str, ...] = ("activation_sizes", "batchnorm_sizes", "pool_sizes", "fusion_chains",
                                "convnet_breakdown", "ceiling_copy")
#: The effects :func:`effects` computes, in the order of the verdict table.
EFFECTS: tuple[str, ...] = ("spread", "near_copy", "knee_mb", "bn_saving", "nhwc_gain", "pool_fraction",
                            "small_share", "share_ratio", "fusion_gain", "fusion_realised")


def gpu_frame(frames: Mapping[str, pd.DataFrame | None], name: str) -> pd.DataFrame | None:
    """``frames[name]`` if it holds rows measured on a GPU (a frame with no metadata counts as one),
    else None: a CPU frame is never a "now"."""
    if not isinstance(frames, Mapping):
        raise TypeError(f"frames must be a dict of experiment name → DataFrame or None, got {type(frames).__name__}")
    return gpu_rows(frames.get(name), f"frames[{name!r}]")


#: The GPU a frame was measured on (None for no frame, a CPU run, or an unknown device).
gpu_of = spec_of


def copy_ceiling(copy: pd.DataFrame | None, *measured: pd.DataFrame | None) -> tuple[float | None, Any]:
    """``(bandwidth, source)``: the copy ceiling (bytes/s) the chapter compares bandwidths with.

    The fastest copy of a GPU ``ceiling_copy`` frame, else the achievable bandwidth
    (:func:`perfkit.achievable_ceilings`) of the GPU the first of ``measured`` ran on, else
    ``(None, None)``.
    """
    from ..calibration import achievable_ceilings
    from ..provenance import source_of

    if gpu_rows(copy, "copy") is not None and "gbps" in copy.columns:
        best = float(copy["gbps"].max())
        if math.isfinite(best) and best > 0:
            return best * 1e9, source_of(copy) or "ceiling_copy"
    for frame in measured:
        spec = gpu_of(frame)
        if spec is not None and spec.mem_bandwidth:
            ceilings = achievable_ceilings(spec)
            return ceilings.bandwidth, ceilings.source
    return None, None


def copy_frame(spec: Any, *measured: pd.DataFrame | None) -> pd.DataFrame | None:
    """The ``ceiling_copy`` frame of the GPU the chapter's numbers come from: measured live when
    ``spec`` (the device in use) is a GPU, else recorded for the GPU that measured the first of
    ``measured`` with one; None without a GPU or a recording (a CPU's copy is never a GPU's ceiling)."""
    from ..provenance import run_or_load

    gpu = spec if getattr(spec, "kind", None) == "gpu" else next(
        (gpu_of(f) for f in measured if gpu_of(f) is not None), None)
    return None if gpu is None else run_or_load("ceiling_copy", device=gpu)[0]


def cpu_ceiling(spec: Any) -> tuple[float | None, str | None]:
    """``(bandwidth, source)``: the copy bandwidth (bytes/s) perfkit measured for ``spec`` when it is
    a CPU, the line a CPU run's figures draw; ``(None, None)`` for a GPU or a CPU without one."""
    from ..devices import DeviceSpec

    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a DeviceSpec (pk.current_device()), got {spec!r}")
    if spec.kind != "cpu" or not spec.mem_bandwidth:
        return None, None
    return spec.mem_bandwidth, spec.sources.get("mem_bandwidth")


def _number(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def activation_effects(acts: pd.DataFrame | None, ceiling: float | None) -> dict[str, float | None]:
    """§2: ``spread`` (slowest ÷ fastest fitted GB/s), ``near_copy`` (best fitted bandwidth ÷
    ``ceiling``) and ``knee_mb`` (median knee, 1e6 bytes) of an ``activation_sizes`` frame."""
    from ..experiments.memory import bandwidth_fit

    out: dict[str, float | None] = {"spread": None, "near_copy": None, "knee_mb": None}
    if acts is None:
        return out
    fits = bandwidth_fit(acts, ["op", "pass"], ceiling=ceiling)
    if fits["gbps"].notna().any():
        out["spread"] = _number(fits["gbps"].min() / fits["gbps"].max())
        out["knee_mb"] = _number(fits["knee_bytes"].median() / 1e6)
    if fits["fraction"].notna().any():
        out["near_copy"] = _number(fits["fraction"].max())
    return out


def batchnorm_effects(bn: pd.DataFrame | None, ceiling: float | None) -> dict[str, float | None]:
    """§3: ``nhwc_gain`` (NCHW ÷ NHWC time, forward + backward, largest size) and ``bn_saving``
    (two-pass bytes ÷ the bytes the time allows at ``ceiling``, best) of a ``batchnorm_sizes`` frame."""
    from ..experiments.memory import batchnorm_bytes, layout_speedup

    out: dict[str, float | None] = {"bn_saving": None, "nhwc_gain": None}
    if bn is None:
        return out
    speed = layout_speedup(bn)
    largest = speed[speed["elements"] == speed["elements"].max()].set_index("pass")
    if "forward+backward" in largest.index:
        out["nhwc_gain"] = _number(largest.loc["forward+backward", "speedup"])
    if ceiling is not None:
        out["bn_saving"] = _number(batchnorm_bytes(bn, ceiling)["two_pass_ratio"].max())
    return out


def pool_effects(pools: pd.DataFrame | None, ceiling: float | None) -> dict[str, float | None]:
    """§4: ``pool_fraction``, the median fitted bandwidth of a ``pool_sizes`` frame ÷ ``ceiling``."""
    from ..experiments.memory import bandwidth_fit

    if pools is None or ceiling is None:
        return {"pool_fraction": None}
    fits = bandwidth_fit(pools, ["kind", "window", "pass"], ceiling=ceiling)
    return {"pool_fraction": _number(fits["fraction"].median()) if fits["fraction"].notna().any() else None}


def fusion_effects(fused: pd.DataFrame | None) -> dict[str, float | None]:
    """§5: ``fusion_gain`` (eager ÷ compiled time, forward + backward, median) and ``fusion_realised``
    (measured ÷ predicted saving, median) of a ``fusion_chains`` frame."""
    from ..experiments.fusion import fusion_savings

    out: dict[str, float | None] = {"fusion_gain": None, "fusion_realised": None}
    if fused is None:
        return out
    both = fusion_savings(fused)
    both = both[both["phase"] == "forward+backward"]
    if both["speedup"].notna().any():
        out["fusion_gain"] = _number(both["speedup"].median())
    realised = both["time_saved_s"] / both["predicted_saved_s"]
    if realised.notna().any():
        out["fusion_realised"] = _number(realised.median())
    return out


def network_effects(net: pd.DataFrame | None) -> dict[str, float | None]:
    """§6: ``small_share`` (memory-bound share of the small CNN's layer time) and ``share_ratio``
    (that share ÷ the wide CNN's) of a ``convnet_breakdown`` frame."""
    from ..experiments.convnet import memory_share

    out: dict[str, float | None] = {"small_share": None, "share_ratio": None}
    if net is None:
        return out
    share = memory_share(net).set_index("network")["memory_share"]
    if "small" in share.index:
        out["small_share"] = _number(share["small"])
        if "wide" in share.index and out["small_share"] is not None and share["wide"] > 0:
            out["share_ratio"] = _number(share["small"] / share["wide"])
    return out


def effects(frames: Mapping[str, pd.DataFrame | None]) -> dict[str, float | None]:
    """Every effect of :data:`EFFECTS` from GPU ``frames`` (None where a frame is missing, measured
    on a CPU, or too small to fit)."""
    acts, bn, pools = (gpu_frame(frames, n) for n in ("activation_sizes", "batchnorm_sizes", "pool_sizes"))
    ceiling, _ = copy_ceiling(gpu_frame(frames, "ceiling_copy"), acts, bn, pools)
    return {**activation_effects(acts, ceiling), **batchnorm_effects(bn, ceiling), **pool_effects(pools, ceiling),
            **network_effects(gpu_frame(frames, "convnet_breakdown")),
            **fusion_effects(gpu_frame(frames, "fusion_chains"))}


def frames() -> dict[str, pd.DataFrame | None]:
    """The recorded GPU frames that findings() reads (never live, never a CPU's); ``ceiling_copy``
    from the GPU that recorded ``activation_sizes`` (or any GPU's, without it). None where missing."""
    out = recorded(EXPERIMENTS[:-1])
    spec = next((gpu_of(f) for f in out.values() if gpu_of(f) is not None), None)
    return {**out, **recorded(["ceiling_copy"], spec)}


def findings(frames: Mapping[str, pd.DataFrame | None]) -> list[Finding]:
    """One Finding per rule of the chapter, from frames (None where not measured; see :func:`effects`)."""
    e = effects(frames)
    return [
        finding("Time is bytes", "NVIDIA memory-limited guide", "duration follows the bytes loaded and stored",
                now=e["spread"], holds_at=0.75, gone_below=0.5, fmt="{:.2f}",
                where="§2: slowest ÷ fastest GB/s, 8 activation passes"),
        finding("Large tensors stream at copy speed", "byte model (pk.memory_time)",
                "bandwidth of a large activation ≈ the copy ceiling", now=e["near_copy"], holds_at=0.8,
                gone_below=0.5, fmt="{:.0%}", where="§2: best fitted GB/s ÷ copy ceiling"),
        finding("Small tensors are launch-bound", "NVIDIA GPU background (latency)",
                "below the knee, duration is flat", now=e["knee_mb"], holds_at=1, gone_below=0.1,
                fmt="{:.1f} MB", where="§2: median knee, bytes moved"),
        finding("Persistent batch norm", "NVIDIA memory-limited guide", "persistent kernels require fewer loads",
                now=e["bn_saving"], holds_at=1.15, gone_below=0.95,
                where="§3: two-pass bytes ÷ bytes the time allows, best"),
        finding("NHWC where possible", "NVIDIA convolution guide", "channels-last batch norm is faster",
                now=e["nhwc_gain"], holds_at=1.1, gone_below=1.03, where="§3: NCHW ÷ NHWC time, largest size"),
        finding("Pooling is memory-bound", "NVIDIA Getting Started guide", "pooling runs at memory speed",
                now=e["pool_fraction"], holds_at=0.6, gone_below=0.3, fmt="{:.0%}",
                where="§4: median GB/s ÷ copy ceiling"),
        finding("Memory-bound layers matter in small networks", "NVIDIA memory-limited guide",
                "a significant share of a small network's time", now=e["small_share"], holds_at=0.25,
                gone_below=0.1, fmt="{:.0%}", where="§6: memory-bound share of the small CNN's layer time"),
        finding("… more than in larger networks", "NVIDIA memory-limited guide",
                "the share shrinks when the layers grow", now=e["share_ratio"], holds_at=1.5, gone_below=1.1,
                fmt="{:.1f}×", where="§6: memory share, small ÷ 4× wider CNN"),
        finding("Fuse the ops after a GEMM", "not in the guide (torch.compile)",
                "fusing the memory-bound tail saves time", now=e["fusion_gain"], holds_at=1.1, gone_below=1.02,
                where="§5: eager ÷ compiled, forward + backward, median"),
        finding("Bytes saved predict time saved", "byte model (pk.chain_bytes)",
                "fusion saves what its bytes are worth", now=e["fusion_realised"], holds_at=0.5,
                gone_below=0.2, fmt="{:.0%}", where="§5: measured ÷ predicted saving, median"),
    ]
