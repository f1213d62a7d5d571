"""The verdicts of chapter 06_memory_limited, computed from the frames the chapter shows.

The frames, by experiment name (:data:`EXPERIMENTS`): ``activation_sizes``, ``batchnorm_sizes``,
``pool_sizes``, ``fusion_chains``, ``convnet_breakdown`` and ``ceiling_copy`` (the copy ceiling the
bandwidths are compared with; without it, the achievable bandwidth of the GPU the frames were
measured on). A frame measured on a CPU is never used: its rule shows "no data yet". No published
benchmark of these layers from 2015–2023 exists, so every "then" is empty. Bandwidths in bytes/s.

Where nothing was measured, :func:`alternatives` gives a rule a published "now" where one measures
it (Liger-Kernel's H100 kernels, eager and fused; gpu-benches' H200 small kernels), else the
model's prediction for an H100.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import pandas as pd

from ...calibration import calibrated
from ...devices import DeviceSpec, device_spec
from ...memory_model import layer_bytes, memory_time
from ...provenance import source_of
from ..evidence import as_measured, frame_of, from_model, from_published, modern, number, prefer, today
from ..frames import gpu_rows, recorded, spec_of
from ...experiments.run import run_or_load
from ..timing.published import launch_bound_bytes
from ..verdict import Band, Evidence, Finding, finding, instead_of
from . import convnet, fusion
from . import experiments as memory
from . import published as mp
from .convnet import memory_share
from .experiments import bandwidth_fit, batchnorm_bytes, layout_speedup
from .fusion import fusion_savings

TITLE = "Memory-limited layers"
CHAPTER = "06_memory_limited"

#: The experiments whose frames :func:`findings` reads (keys of its ``frames``).
EXPERIMENTS: tuple[str, ...] = ("activation_sizes", "batchnorm_sizes", "pool_sizes", "fusion_chains",
                                "convnet_breakdown", "ceiling_copy")
#: The two-sided claims ("≈ the copy ceiling", "at memory speed", "saves what its bytes are worth"),
#: judged as a factor either way of what they claim (1): each holds within the factor its one-sided
#: threshold always allowed below (0.8, 0.6, 0.5), mirrored above, and is gone beyond the factor it was
#: gone below (0.5, 0.3, 0.2). Above the claim is as wrong as below: a tensor "streaming" at 1.5× the copy
#: ceiling is served from cache, and a fusion that saves 11× what its bytes are worth (the H200's
#: conv → batch norm → ReLU chain) saves something other than bytes.
AT_COPY_SPEED = Band(1.0, holds_within=1.25, gone_beyond=2.0)
AT_MEMORY_SPEED = Band(1.0, holds_within=1 / 0.6, gone_beyond=1 / 0.3)
BYTES_PREDICT_TIME = Band(1.0, holds_within=2.0, gone_beyond=5.0)
#: The effects :func:`effects` computes, in the order of the verdict table.
EFFECTS: tuple[str, ...] = ("spread", "near_copy", "knee_mb", "bn_saving", "nhwc_gain", "pool_fraction",
                            "small_share", "share_ratio", "fusion_gain", "fusion_realised")


def gpu_frame(frames: Mapping[str, pd.DataFrame | None], name: str) -> pd.DataFrame | None:
    """``frames[name]`` if it holds rows measured on a GPU (a frame with no metadata counts as one),
    else None: a CPU frame is never a "now"."""
    if not isinstance(frames, Mapping):
        raise TypeError(f"frames must be a dict of experiment name → DataFrame or None, got {type(frames).__name__}")
    return gpu_rows(frames.get(name), f"frames[{name!r}]")



def copy_ceiling(copy: pd.DataFrame | None, *measured: pd.DataFrame | None) -> tuple[float | None, Any]:
    """``(bandwidth, source)``: the copy ceiling (bytes/s) the chapter compares bandwidths with.

    The fastest copy of a GPU ``ceiling_copy`` frame, else the achievable bandwidth of the GPU the
    first of ``measured`` ran on (with its recorded ceilings: :func:`perfkit.calibrated`), else
    ``(None, None)``.
    """

    if gpu_rows(copy, "copy") is not None and "gbps" in copy.columns:
        best = float(copy["gbps"].max())
        if math.isfinite(best) and best > 0:
            return best * 1e9, source_of(copy) or "ceiling_copy"
    for frame in measured:
        spec = spec_of(frame)
        if spec is not None and spec.mem_bandwidth:
            # the frame was measured on this GPU: compare it with that GPU's recorded ceilings (the edge)
            ceilings = calibrated(spec).ceilings
            return ceilings.bandwidth, ceilings.source
    return None, None


def copy_frame(spec: Any, *measured: pd.DataFrame | None) -> pd.DataFrame | None:
    """The ``ceiling_copy`` frame of the GPU the chapter's numbers come from: measured live when
    ``spec`` (the device in use) is a GPU, else recorded for the GPU that measured the first of
    ``measured`` with one; None without a GPU or a recording (a CPU's copy is never a GPU's ceiling)."""

    gpu = spec if getattr(spec, "kind", None) == "gpu" else next(
        (spec_of(f) for f in measured if spec_of(f) is not None), None)
    return None if gpu is None else run_or_load("ceiling_copy", device=gpu)[0]


def cpu_ceiling(spec: Any) -> tuple[float | None, str | None]:
    """``(bandwidth, source)``: the copy bandwidth (bytes/s) perfkit measured for ``spec`` when it is
    a CPU, the line a CPU run's figures draw; ``(None, None)`` for a GPU or a CPU without one."""

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

    if pools is None or ceiling is None:
        return {"pool_fraction": None}
    fits = bandwidth_fit(pools, ["kind", "window", "pass"], ceiling=ceiling)
    return {"pool_fraction": _number(fits["fraction"].median()) if fits["fraction"].notna().any() else None}


def fusion_effects(fused: pd.DataFrame | None) -> dict[str, float | None]:
    """§5: ``fusion_gain`` (eager ÷ compiled time, forward + backward, median) and ``fusion_realised``
    (measured ÷ predicted saving, median) of a ``fusion_chains`` frame."""

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
    spec = next((spec_of(f) for f in out.values() if spec_of(f) is not None), None)
    return {**out, **recorded(["ceiling_copy"], spec)}


#: The published tables of current GPUs the verdicts can rest on (see :func:`alternatives`).
MODERN: tuple[str, ...] = ("liger_memory_bound", "gpu_benches_small_kernels")
#: Liger's fused kernels (forward rows carry the bytes), and its eager/fused pairs of a GEMM's tail.
LIGER_FUSED = ("liger", "liger_fused_add_rms_norm")
LIGER_PAIRS = {"relu_squared": ("torch", "liger"), "megatron_swiglu": ("torch", "liger"),
               "fused_add_rms_norm": ("huggingface", "liger_fused_add_rms_norm")}


def modern_frames() -> dict[str, pd.DataFrame | None]:
    """The published tables of :data:`MODERN` (None where the published-data folder lacks one)."""
    return modern(MODERN)


def liger_effects(liger: pd.DataFrame | None, spec: DeviceSpec) -> dict[str, float | None]:
    """Effects of :data:`EFFECTS` measured by Liger-Kernel's benchmarks on ``spec`` (its rows of
    that GPU; bandwidths against ``spec``'s datasheet bandwidth, no copy ceiling being published),
    with :mod:`perfkit.book.memory_limited.published`:

    - ``spread``, ``near_copy``: slowest ÷ fastest GB/s of the fused kernels at their largest size
      (:func:`~perfkit.book.memory_limited.published.bandwidth_spread`), and the fastest ÷ the
      datasheet bandwidth (:func:`~perfkit.book.memory_limited.published.achieved_fraction_of_bandwidth`);
    - ``bn_saving``: the fused layer norm (a row kept on chip) at its largest size: the bytes a
      two-pass kernel would move (x read twice, y written) ÷ the bytes its time allows;
    - ``fusion_gain``: eager ÷ fused time, forward + backward, median over sizes of ReLU², SwiGLU and
      add + RMS norm (:data:`LIGER_PAIRS`);
    - ``fusion_realised``: time fusion saved ÷ the byte model's predicted saving, median over the
      eager/fused pairs (:func:`~perfkit.book.memory_limited.published.fusion_saving_realised`).
    """

    out: dict[str, float | None] = dict.fromkeys(("spread", "near_copy", "bn_saving", "fusion_gain",
                                                  "fusion_realised"))
    rows = None if liger is None else liger[liger["device"] == spec.name]
    if rows is None or not len(rows) or not spec.mem_bandwidth:
        return out
    out["spread"] = number(mp.bandwidth_spread(liger, spec))
    out["near_copy"] = number(mp.achieved_fraction_of_bandwidth(liger, spec))
    out["fusion_realised"] = number(mp.fusion_saving_realised(liger, spec))
    norm = rows[(rows["kernel"] == "layer_norm") & (rows["provider"] == "liger") & (rows["mode"] == "forward")
                & rows["io_bytes_fwd"].notna()]
    if len(norm):
        largest = norm.loc[norm["x_value"].idxmax()]
        allowed = largest["time_s"] * spec.mem_bandwidth
        out["bn_saving"] = number(1.5 * largest["io_bytes_fwd"] / allowed)  # x read twice + y: 3 of io's 2
    gains = []
    for kernel, (eager, fast) in LIGER_PAIRS.items():
        t = rows[(rows["kernel"] == kernel) & (rows["mode"] == "full")].pivot_table(
            index="x_value", columns="provider", values="time_s")
        if eager in t and fast in t:
            gains.append(t[eager] / t[fast])
    if gains:
        out["fusion_gain"] = number(pd.concat(gains).median())
    return out


def launch_knee(small: pd.DataFrame | None) -> float | None:
    """gpu-benches' small kernels launched one by one: the most bytes (1e6) a call moves while it
    still takes under twice the launch floor (:func:`perfkit.book.timing.published.launch_bound_bytes`),
    where moving the bytes takes as long as the fixed cost: the knee. None without the rows."""

    if small is None or not len(small):
        return None
    knee = launch_bound_bytes(small, "launch", 2.0)
    return None if knee is None else number(knee / 1e6)


def model_effects(spec: DeviceSpec) -> dict[str, float | None]:
    """Every effect of :data:`EFFECTS` as the byte and GEMM models predict it on ``spec``: the
    chapter's model frames (activations, CNN breakdown, fusion chains) run through :func:`effects`,
    batch norm's two passes against one, pooling at the model's bandwidth; NCHW and NHWC move the
    same bytes, so ``nhwc_gain`` is 1.0."""

    ceiling = spec.ceilings.bandwidth
    e = {**activation_effects(as_measured(memory.predicted_activations(spec)), ceiling),
         **network_effects(as_measured(convnet.predicted_breakdown(spec))),
         **fusion_effects(as_measured(fusion.predicted_chains(spec)))}
    shape = (32, 256, 56, 56)
    one_pass = layer_bytes("batchnorm", shape, "bfloat16")
    x_bytes = 2 * shape[0] * shape[1] * shape[2] * shape[3]
    e["bn_saving"] = number((one_pass + x_bytes) / (memory_time(one_pass, spec) * ceiling))
    e["nhwc_gain"] = 1.0
    pool = layer_bytes("maxpool", (64, 64, 112, 112), "bfloat16", kernel_size=3, stride=2)
    e["pool_fraction"] = number(pool / memory_time(pool, spec) / ceiling)
    return e


def alternatives(published: Mapping[str, pd.DataFrame | None] | None,
                 spec: DeviceSpec | None = None) -> dict[str, Evidence | None]:
    """Each rule's "now" where nothing was measured (keys :data:`EFFECTS`): Liger-Kernel's H100
    kernels and gpu-benches' H200 small kernels where they measure the rule, else the model's
    prediction for ``spec`` (default: the H100 SXM). ``published`` maps the names of :data:`MODERN`
    to their frames (None or absent: not available)."""

    spec = today(spec)
    liger, small = frame_of(published, "liger_memory_bound"), frame_of(published, "gpu_benches_small_kernels")
    h100 = device_spec("H100-SXM")
    h100_rows = None if liger is None else liger[liger["device"] == h100.name]
    lg = liger_effects(liger, h100)
    m = model_effects(spec)
    do_bench = "do_bench, L2 flushed"
    wheres = {
        "spread": f"{do_bench}: slowest ÷ fastest GB/s of the fused kernels, largest size",
        "near_copy": f"{do_bench}: best fused GB/s ÷ the datasheet's {h100.mem_bandwidth / 1e12:.2f} TB/s",
        "bn_saving": f"{do_bench}, fused layer norm (a row kept on chip, not batch norm): two-pass bytes ÷ the "
                     "bytes its time allows",
        "fusion_gain": f"{do_bench}: eager ÷ fused, forward + backward, ReLU², SwiGLU, add + RMS norm, median",
        "fusion_realised": f"{do_bench}: time saved ÷ the byte model's predicted saving, eager/fused pairs "
                           "at their largest size, median",
    }
    model_where = {"spread": "the model's activations: one bandwidth for all", "near_copy": "the model's "
                   "activations ÷ its bandwidth", "knee_mb": "the model's latency × bandwidth",
                   "bn_saving": "two-pass ÷ one-pass bytes at the model's bandwidth", "nhwc_gain": "the byte "
                   "model: the same bytes in either layout", "pool_fraction": "the byte model: a 3×3/2 max pool "
                   "of 64×64×112², GB/s ÷ its bandwidth", "small_share": "the model's small CNN",
                   "share_ratio": "the model's small ÷ wide CNN", "fusion_gain": "the model's fusion chains",
                   "fusion_realised": "by construction: the model's saving is its bytes"}
    out: dict[str, Evidence | None] = {}
    for key in EFFECTS:
        measured = from_published(lg.get(key), h100_rows, wheres[key], device=h100.name) if key in wheres else None
        if key == "knee_mb":
            measured = from_published(launch_knee(small), small, "host-timed, one launch per kernel: the most "
                                      "bytes moved in under twice the launch floor")
        out[key] = prefer(measured, from_model(m.get(key), spec, model_where[key]))
    return out


def findings(frames: Mapping[str, pd.DataFrame | None], *,
             instead: Mapping[str, Evidence | None] | None = None) -> list[Finding]:
    """One Finding per rule of the chapter, from frames (None where not measured; see :func:`effects`);
    ``instead`` (:func:`alternatives`) gives a published or predicted "now" to the rules nothing
    measured."""
    e = effects(frames)
    alt = instead_of(instead, EFFECTS)
    on = {name: gpu_frame(frames, name) for name in EXPERIMENTS}
    return [
        finding("Time is bytes", "NVIDIA memory-limited guide", "duration follows the bytes loaded and stored",
                now=e["spread"], holds_at=0.75, gone_below=0.5, fmt="{:.2f}",
                where="§2: slowest ÷ fastest GB/s, 8 activation passes", on=on["activation_sizes"],
                instead=alt["spread"]),
        finding("Large tensors stream at copy speed", "byte model (pk.memory_time)",
                "bandwidth of a large activation ≈ the copy ceiling", now=e["near_copy"], band=AT_COPY_SPEED,
                fmt="{:.0%}", where="§2: best fitted GB/s ÷ copy ceiling", on=on["activation_sizes"],
                instead=alt["near_copy"]),
        finding("Small tensors are launch-bound", "NVIDIA GPU background (latency)",
                "below the knee, duration is flat", now=e["knee_mb"], holds_at=1, gone_below=0.1,
                fmt="{:.1f} MB", where="§2: median knee, bytes moved", on=on["activation_sizes"],
                instead=alt["knee_mb"]),
        finding("Persistent batch norm", "NVIDIA memory-limited guide", "persistent kernels require fewer loads",
                now=e["bn_saving"], holds_at=1.15, gone_below=0.95,
                where="§3: two-pass bytes ÷ bytes the time allows, best", on=on["batchnorm_sizes"],
                instead=alt["bn_saving"]),
        finding("NHWC where possible", "NVIDIA convolution guide", "channels-last batch norm is faster",
                now=e["nhwc_gain"], holds_at=1.1, gone_below=1.03, where="§3: NCHW ÷ NHWC time, largest size",
                on=on["batchnorm_sizes"], instead=alt["nhwc_gain"]),
        finding("Pooling is memory-bound", "NVIDIA Getting Started guide", "pooling runs at memory speed",
                now=e["pool_fraction"], band=AT_MEMORY_SPEED, fmt="{:.0%}",
                where="§4: median GB/s ÷ copy ceiling", on=on["pool_sizes"], instead=alt["pool_fraction"]),
        finding("Memory-bound layers matter in small networks", "NVIDIA memory-limited guide",
                "a significant share of a small network's time", now=e["small_share"], holds_at=0.25,
                gone_below=0.1, fmt="{:.0%}", where="§6: memory-bound share of the small CNN's layer time",
                on=on["convnet_breakdown"], instead=alt["small_share"]),
        finding("… more than in larger networks", "NVIDIA memory-limited guide",
                "the share shrinks when the layers grow", now=e["share_ratio"], holds_at=1.5, gone_below=1.1,
                fmt="{:.1f}×", where="§6: memory share, small ÷ 4× wider CNN", on=on["convnet_breakdown"],
                instead=alt["share_ratio"]),
        finding("Fuse the ops after a GEMM", "not in the guide (torch.compile)",
                "fusing the memory-bound tail saves time", now=e["fusion_gain"], holds_at=1.1, gone_below=1.02,
                where="§5: eager ÷ compiled, forward + backward, median", on=on["fusion_chains"],
                instead=alt["fusion_gain"]),
        finding("Bytes saved predict time saved", "byte model (pk.chain_bytes)",
                "fusion saves what its bytes are worth", now=e["fusion_realised"], band=BYTES_PREDICT_TIME,
                fmt="{:.0%}", where="§5: measured ÷ predicted saving, median", on=on["fusion_chains"],
                instead=alt["fusion_realised"]),
    ]
