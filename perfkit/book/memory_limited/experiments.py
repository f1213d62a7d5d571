"""Memory-limited layer experiments (E13): activations, batch norm and pooling, time against bytes.

Rows hold a pass's bytes (:func:`perfkit.memory_model.layer_bytes`), ``time_s`` (median seconds),
``gbps`` (bytes / time_s / 1e9) and ``predicted_s`` (the byte model on the measured GPU; NaN on a
CPU). GPU sweeps: bfloat16, up to 2^28 elements; CPU runs: float32, small, one thread, seconds.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..._validate import dtype_name, one_of, positive_int, positive_ints, positive_number, sequence_of
from ...devices import DeviceSpec
from ...dtypes import canonical_dtype, itemsize, torch_dtype
from ...matmul import seeded_on
from ...memory_model import PASSES as _PASSES
from ...memory_model import layer_bytes, memory_time, pool_output_shape, predict_layer_time
from ...placement import ensure_fits, lean_bench, resolve_device
from ...units import GIGA
from ...experiments.measure import measured_spec, sweep, timing_row
from ..reader import MEMORY_NAMES, readable
from ...experiments.registry import register

__all__ = ["ACTIVATION_OPS", "LAYOUTS", "MEMORY_DTYPES", "POOL_INDEX_ITEMSIZE", "POOL_WINDOWS", "activation_sizes",
           "bandwidth_fit", "batchnorm_bytes", "batchnorm_sizes", "byte_table", "for_reader", "layout_speedup",
           "pool_sizes", "predicted_activations"]

#: The activations timed, by their :data:`perfkit.memory_model.ACTIVATIONS` names.
ACTIVATION_OPS: tuple[str, ...] = ("relu", "gelu", "sigmoid", "tanh")
#: Pooling windows: name → (kernel_size, stride, padding). ResNet's stem pools 3×3/2 with padding 1.
POOL_WINDOWS: dict[str, tuple[int, int, int]] = {"3×3/2, pad 1": (3, 2, 1), "2×2/2": (2, 2, 0)}
#: Memory layouts of batch norm's input: contiguous NCHW, or channels_last (NHWC).
LAYOUTS: tuple[str, ...] = ("NCHW", "NHWC")
#: Storage dtypes the experiments accept (a CPU always runs float32).
MEMORY_DTYPES: tuple[str, ...] = ("bfloat16", "float16", "float32")
#: Bytes per argmax index PyTorch's max pooling saves (int64), written forward and read backward.
POOL_INDEX_ITEMSIZE = 8

_GPU_ELEMENTS = tuple(4**k for k in range(7, 15))  # 2^14 … 2^28
_QUICK_ELEMENTS = (1 << 12, 1 << 16, 1 << 20, 1 << 24)
_CPU_ELEMENTS = (1 << 10, 1 << 13, 1 << 16, 1 << 19, 1 << 22)
_BN_GPU = ((1, 64, 7, 7), (1, 64, 14, 14), (1, 64, 28, 28), (1, 64, 56, 56), (4, 64, 56, 56), (16, 64, 56, 56),
           (64, 64, 56, 56), (256, 64, 56, 56))
_BN_QUICK = ((1, 64, 14, 14), (1, 64, 56, 56), (16, 64, 56, 56), (64, 64, 56, 56))
_POOL_GPU = ((1, 64, 14, 14), (1, 64, 28, 28), (1, 64, 56, 56), (1, 64, 112, 112), (4, 64, 112, 112),
             (16, 64, 112, 112), (64, 64, 112, 112))
_POOL_QUICK = ((1, 64, 28, 28), (1, 64, 112, 112), (16, 64, 112, 112))

_TIMING = dict(time_s="median duration, seconds", iqr_s="inter-quartile range of the samples, seconds")
_PASS = "'forward' or 'backward' (the backward kernel alone, from saved tensors)"
_PREDICTED = "pk.predict_layer_time on the measured GPU (latency + bytes / achievable bandwidth), seconds; NaN on CPU"
_NCHW = dict(N="batch", C="channels", H="input height", W="input width", elements="N·C·H·W input elements")


def _setup(device: str, dtype: str) -> tuple[str, str]:
    """(device, dtype): ``dtype`` checked against :data:`MEMORY_DTYPES` first; a CPU runs float32."""
    asked = dtype_name("dtype", dtype, MEMORY_DTYPES)
    device = resolve_device(device)
    return device, "float32" if device == "cpu" else asked


def _shape4(name: str, shape: Any) -> tuple[int, int, int, int]:
    return positive_ints(name, shape, 4, "(N, C, H, W)")  # type: ignore[return-value]


def _pick(given: Any, device: str, quick: bool, cpu: tuple, tiny: tuple, full: tuple) -> Any:
    return given if given is not None else cpu if device == "cpu" else tiny if quick else full


def _shapes(given: Any, device: str, quick: bool, full: tuple, tiny: tuple, cpu: int) -> list[tuple]:
    """``given`` (N, C, H, W) shapes, checked; else ``full`` (GPU), ``tiny`` (quick) or ``full[:cpu]`` (CPU)."""
    return sequence_of("shapes", _pick(given, device, quick, full[:cpu], tiny, full), _shape4)


def _predict(fn, *args: Any, spec: DeviceSpec | None, **kwargs: Any) -> float:
    """``fn(*args, spec, **kwargs)`` in seconds; NaN without a GPU spec or a known bandwidth."""
    try:
        return float(fn(*args, spec, **kwargs)) if spec is not None else np.nan
    except LookupError:
        return np.nan


def _activation_fn(op: str, pass_: str, elements: int, dtype: str, device: str):
    """A zero-argument function: ``op`` forward on a 1-D tensor, or its aten backward kernel alone."""
    import torch

    on, gen = seeded_on(device)
    randn = functools.partial(torch.randn, generator=gen, device=on, dtype=torch_dtype(dtype))
    x = randn(elements)
    forward = {"relu": torch.relu, "gelu": torch.nn.functional.gelu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}[op]
    if pass_ == "forward":
        return lambda: forward(x)
    y, dy = forward(x), randn(elements)
    aten = torch.ops.aten
    return {"relu": lambda: aten.threshold_backward(dy, y, 0), "gelu": lambda: aten.gelu_backward(dy, x),
            "sigmoid": lambda: aten.sigmoid_backward(dy, y), "tanh": lambda: aten.tanh_backward(dy, y)}[op]


_ACT_COLUMNS = dict(op="'relu', 'gelu', 'sigmoid' or 'tanh'",
                    **{"pass": "'forward' (y = f(x)) or 'backward' (the aten backward kernel alone: "
                               "threshold_backward, gelu_backward, sigmoid_backward, tanh_backward)"},
                    elements="elements of the (1-D) tensor", dtype="storage dtype",
                    bytes="bytes the pass moves at least (pk.layer_bytes: 2·E·s forward, 3·E·s backward)",
                    **_TIMING, gbps="bytes / time_s, 1e9 bytes/s", predicted_s=_PREDICTED)


def _activation_row(op, pass_, n, d, spec, m=None) -> dict[str, Any]:
    nbytes = layer_bytes(op, (n,), d, pass_=pass_)
    timing = timing_row(m) if m is not None else {"time_s": np.nan, "iqr_s": np.nan}
    pred = _predict(predict_layer_time, op, (n,), d, spec=spec, pass_=pass_)
    return {"op": op, "pass": pass_, "elements": n, "dtype": d, "bytes": nbytes, **timing,
            "gbps": m.gbps(nbytes) if m is not None else np.nan, "predicted_s": pred}


@register("activation_sizes", "Activations (ReLU, GELU, sigmoid, tanh) forward and backward as the tensor grows "
          "from 2^14 to 2^28 elements: flat (launch-bound), then time ∝ bytes (NVIDIA memory-limited guide)",
          _ACT_COLUMNS, needs=("cuda",))
def activation_sizes(*, ops=ACTIVATION_OPS, elements=None, dtype="bfloat16", device="auto", quick=False,
                     progress=True, on_row=None) -> pd.DataFrame:
    """Each op and pass at each size: GPU 2^14 … 2^28 elements (×4), ``quick`` 2^12 … 2^24 (×16),
    CPU 2^10 … 2^22 (×8) in float32."""
    device, d = _setup(device, dtype)
    ops_ = sequence_of("ops", ops, lambda n, v: one_of(n, v, ACTIVATION_OPS))
    sizes = sequence_of("elements", _pick(elements, device, quick, _CPU_ELEMENTS, _QUICK_ELEMENTS, _GPU_ELEMENTS),
                        positive_int)
    ensure_fits(4 * max(sizes) * itemsize(d), device, what="activation_sizes")  # x, y, dy, dx
    spec = measured_spec(device, cpu=False)
    points = [(op, p, n) for op in ops_ for p in _PASSES for n in sizes]

    def measure(point):
        op, p, n = point
        m = lean_bench(_activation_fn(op, p, n, d, device), device, f"{op} {p} {n} elements {d}")
        return _activation_row(op, p, n, d, spec, m)

    return sweep(points, measure, on_row=on_row, progress=progress, desc="activations")


def predicted_activations(spec: DeviceSpec, *, ops=ACTIVATION_OPS, elements=_GPU_ELEMENTS,
                          dtype: str = "bfloat16") -> pd.DataFrame:
    """The model's view of ``activation_sizes`` on ``spec`` (no measurement): its rows with ``time_s``,
    ``iqr_s`` and ``gbps`` empty and ``predicted_s`` filled. Caption it with :func:`perfkit.provenance.modelled`."""
    d = canonical_dtype(dtype)  # a spec that is not a DeviceSpec: TypeError from pk.memory_time
    ops_ = sequence_of("ops", ops, lambda n, v: one_of(n, v, ACTIVATION_OPS))
    rows = [_activation_row(op, p, n, d, spec) for op in ops_ for p in _PASSES
            for n in sequence_of("elements", elements, positive_int)]
    return pd.DataFrame(rows, columns=list(_ACT_COLUMNS))


def _batchnorm_fns(shape, layout: str, dtype: str, device: str):
    """``(forward, backward, impl)``: F.batch_norm in training mode on an ``layout`` input (float32 weight,
    bias and running statistics, as under mixed precision), its backward alone (autograd.grad of the
    output w.r.t. the input, graph kept), and the name of the autograd node that ran."""
    import torch
    import torch.nn.functional as F

    on, gen = seeded_on(device)  # a pretend GPU's tensors on meta (placement.tensor_device)
    x = torch.randn(shape, generator=gen, device=on, dtype=torch_dtype(dtype))
    if layout == "NHWC":
        x = x.contiguous(memory_format=torch.channels_last)
    x.requires_grad_(True)
    w, b = (torch.full((shape[1],), v, device=on, requires_grad=True) for v in (1.0, 0.0))
    mean, var = torch.zeros(shape[1], device=on), torch.ones(shape[1], device=on)

    def forward():
        return F.batch_norm(x, mean, var, w, b, training=True)

    y = forward()
    dy = torch.randn_like(y)  # in y's memory format
    return forward, (lambda: torch.autograd.grad(y, x, dy, retain_graph=True)), y.grad_fn.name()


_BN_COLUMNS = dict(layout="'NCHW' (contiguous) or 'NHWC' (channels_last)", **{"pass": _PASS}, **_NCHW,
                   dtype="storage dtype of the input (weight, bias and statistics are float32)",
                   impl="the autograd node that ran (e.g. 'CudnnBatchNormBackward0', 'NativeBatchNormBackward0')",
                   bytes_persistent="pk.layer_bytes, persistent=True: x read once per pass, bytes",
                   bytes_two_pass="pk.layer_bytes, persistent=False: x (and dy) read twice, bytes",
                   **_TIMING, gbps="bytes_persistent / time_s, 1e9 bytes/s",
                   predicted_s="pk.predict_layer_time, persistent model, on the measured GPU, seconds; NaN on a CPU",
                   predicted_two_pass_s="the same for the two-pass model, seconds; NaN on a CPU")


@register("batchnorm_sizes", "Batch norm in training mode (F.batch_norm, C = 64), forward and backward, NCHW and "
          "NHWC, from 7×7 to 256×56×56: time against the persistent and two-pass byte models",
          _BN_COLUMNS, needs=("cuda",))
def batchnorm_sizes(*, shapes=None, layouts=LAYOUTS, dtype="bfloat16", device="auto", quick=False, progress=True,
                    on_row=None) -> pd.DataFrame:
    """Each (N, C, H, W) in ``shapes``, layout and pass. GPU: 1×64×7×7 … 256×64×56×56 (×4 in elements);
    ``quick``: 4 of them; CPU: up to 4×64×56×56 in float32."""
    device, d = _setup(device, dtype)
    dims = _shapes(shapes, device, quick, _BN_GPU, _BN_QUICK, 5)
    return _batchnorm_sweep(dims, layouts, d, device, "batchnorm_sizes", on_row, progress)


def _batchnorm_sweep(dims: list[tuple], layouts: Any, dtype: str, device: str, what: str, on_row, progress: bool,
                    ) -> pd.DataFrame:
    """The rows of a batch-norm experiment (``what``): each shape of ``dims``, layout and pass (layouts checked,
    memory checked before anything is allocated)."""
    lays = sequence_of("layouts", layouts, lambda n, v: one_of(n, v, ("nchw", "nhwc")).upper())
    ensure_fits(6 * max(math.prod(s) for s in dims) * itemsize(dtype), device, what=what)
    spec = measured_spec(device, cpu=False)
    points = [(s, lay, p) for s in dims for lay in lays for p in _PASSES]
    return sweep(points, lambda point: _batchnorm_row(*point, dtype, device, spec), on_row=on_row,
                 progress=progress, desc=what.replace("_", " "))


def _batchnorm_row(shape, layout: str, pass_: str, dtype: str, device: str, spec: DeviceSpec | None) -> dict[str, Any]:
    """One measured :data:`_BN_COLUMNS` row: ``pass_`` of training batch norm on a ``layout`` input."""
    forward, backward, impl = _batchnorm_fns(shape, layout, dtype, device)
    m = lean_bench(forward if pass_ == "forward" else backward, device, f"batch norm {pass_} {layout} {shape} {dtype}")
    nbytes = {k: layer_bytes("batchnorm", shape, dtype, pass_=pass_, persistent=k) for k in (True, False)}
    pred = {k: _predict(predict_layer_time, "batchnorm", shape, dtype, spec=spec, pass_=pass_, persistent=k)
            for k in (True, False)}
    return {"layout": layout, "pass": pass_, **dict(zip("NCHW", shape)), "elements": math.prod(shape),
            "dtype": dtype, "impl": impl, "bytes_persistent": nbytes[True], "bytes_two_pass": nbytes[False],
            **timing_row(m), "gbps": m.gbps(nbytes[True]), "predicted_s": pred[True],
            "predicted_two_pass_s": pred[False]}


def _pool_fn(kind: str, window: str, pass_: str, shape, dtype: str, device: str):
    """A zero-argument function: max (with int64 indices, as in training) or average pooling, forward
    or its aten backward kernel alone."""
    import torch

    k, s, p = ([v, v] for v in POOL_WINDOWS[window])
    on, gen = seeded_on(device)
    randn = functools.partial(torch.randn, generator=gen, device=on, dtype=torch_dtype(dtype))
    x = randn(shape)
    aten = torch.ops.aten
    forward = {"max": lambda: aten.max_pool2d_with_indices(x, k, s, p, [1, 1], False),
               "avg": lambda: aten.avg_pool2d(x, k, s, p, False, True, None)}[kind]
    if pass_ == "forward":
        return forward
    y, idx = forward() if kind == "max" else (forward(), None)
    dy = randn(y.shape)
    if kind == "max":
        return lambda: aten.max_pool2d_with_indices_backward(dy, x, k, s, p, [1, 1], False, idx)
    return lambda: aten.avg_pool2d_backward(dy, x, k, s, p, False, True, None)


_POOL_COLUMNS = dict(kind="'max' or 'avg'", window="the window: '3×3/2, pad 1' (ResNet) or '2×2/2'",
                     kernel_size="window height = width", stride="stride", padding="padding",
                     **{"pass": _PASS}, **_NCHW, out_elements="N·C·P·Q output elements", dtype="storage dtype",
                     indices_itemsize="bytes per saved argmax index the measured path writes forward and "
                                      "reads backward (PyTorch: int64 = 8; 0 for average pooling)",
                     bytes="pk.layer_bytes of the pass, plus the index writes of a max-pool forward, bytes",
                     **_TIMING, gbps="bytes / time_s, 1e9 bytes/s",
                     predicted_s="pk.memory_time of bytes on the measured GPU, seconds; NaN on a CPU")


@register("pool_sizes", "Max and average pooling (3×3/2 pad 1 and 2×2/2, C = 64), forward and backward, from "
          "14×14 to 64×112×112: time against bytes, int64 argmax indices included",
          _POOL_COLUMNS, needs=("cuda",))
def pool_sizes(*, shapes=None, kinds=("max", "avg"), windows=tuple(POOL_WINDOWS), dtype="bfloat16", device="auto",
               quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """Each (N, C, H, W) in ``shapes``, kind, window and pass. GPU: 1×64×14×14 … 64×64×112×112;
    ``quick``: 3 of them; CPU: up to 1×64×112×112 in float32."""
    device, d = _setup(device, dtype)
    dims = _shapes(shapes, device, quick, _POOL_GPU, _POOL_QUICK, 4)
    kinds_ = sequence_of("kinds", kinds, lambda n, v: one_of(n, v, ("max", "avg")))
    wins = sequence_of("windows", windows,
                 lambda n, v: v if isinstance(v, str) and v in POOL_WINDOWS else one_of(n, v, tuple(POOL_WINDOWS)))
    for s in dims:  # a window larger than the padded input fails here, before allocating
        for w in wins:
            pool_output_shape(s, *POOL_WINDOWS[w])
    ensure_fits(max(map(math.prod, dims)) * (3 * itemsize(d) + POOL_INDEX_ITEMSIZE), device, what="pool_sizes")
    spec = measured_spec(device, cpu=False)
    points = [(s, kind, w, p) for s in dims for kind in kinds_ for w in wins for p in _PASSES]

    def measure(point):
        shape, kind, w, p = point
        k, st, pad = POOL_WINDOWS[w]
        out = math.prod(pool_output_shape(shape, k, st, pad))
        idx = POOL_INDEX_ITEMSIZE if kind == "max" else 0
        params = dict(kernel_size=k, stride=st, padding=pad) | ({"indices_itemsize": idx} if idx else {})
        nbytes = layer_bytes(f"{kind}pool", shape, d, pass_=p, **params)
        m = lean_bench(_pool_fn(kind, w, p, shape, d, device), device, f"{kind} pool {w} {p} {shape} {d}")
        return {"kind": kind, "window": w, "kernel_size": k, "stride": st, "padding": pad, "pass": p,
                **dict(zip("NCHW", shape)), "elements": math.prod(shape), "out_elements": out, "dtype": d,
                "indices_itemsize": idx, "bytes": nbytes, **timing_row(m), "gbps": m.gbps(nbytes),
                "predicted_s": _predict(memory_time, nbytes, spec=spec)}

    return sweep(points, measure, on_row=on_row, progress=progress, desc="pooling")


def bandwidth_fit(frame: pd.DataFrame | None, by: Sequence[str] = (), *, bytes_column: str = "bytes",
                  ceiling: float | None = None, proportional_at: float = 3.0) -> pd.DataFrame | None:
    """Per group of ``by``: time_s = floor_s + bytes / bandwidth, fitted where time grows with bytes.

    ``floor_s`` is the group's fastest time: the flat part (launch and fixed costs, seconds), and
    the line's intercept. The proportional part is the rows taking at least ``proportional_at`` ×
    ``floor_s``; least squares on them, weighted by 1/time_s² (relative errors), give ``bandwidth``
    (1 / slope, bytes/s; ``gbps`` in 1e9 bytes/s) and ``r2`` (weighted R² of the line there).
    ``knee_bytes`` = floor_s × bandwidth: where moving the bytes takes as long as the fixed cost
    (flat below, proportional above). ``fraction`` = bandwidth / ``ceiling`` (bytes/s, e.g. the measured copy
    ceiling), NaN without one. Fewer than two proportional sizes: NaN. Pure: None in, None out.
    """
    if frame is None:
        return None
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    by = [by] if isinstance(by, str) else list(by)
    missing = [c for c in [*by, bytes_column, "time_s"] if c not in frame.columns]
    if missing:
        raise ValueError(f"frame has no column {missing}; its columns: {list(frame.columns)}")
    if positive_number("proportional_at", proportional_at) <= 1:
        raise ValueError(f"proportional_at must be above 1 (a multiple of the floor), got {proportional_at}")
    ceil = None if ceiling is None else positive_number("ceiling", ceiling)
    rows = []
    for key, g in (frame.groupby(by, sort=False) if by else [((), frame)]):
        g = g[g["time_s"] > 0]
        x, t = g[bytes_column].to_numpy(float), g["time_s"].to_numpy(float)
        floor = float(t.min()) if len(t) else np.nan
        sel = t >= proportional_at * floor
        bw = r2 = np.nan
        if len(np.unique(x[sel])) >= 2:
            xs, ts = x[sel], t[sel]
            slope = np.sum((ts - floor) * xs / ts**2) / np.sum(xs**2 / ts**2)  # least squares, weights 1/time²
            if slope > 0:
                w, fit = 1 / ts**2, floor + slope * xs
                mean = np.sum(w * ts) / np.sum(w)
                bw, r2 = 1.0 / slope, 1 - np.sum(w * (ts - fit) ** 2) / np.sum(w * (ts - mean) ** 2)
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "points": len(g),
                     "fit_points": int(sel.sum()), "floor_s": floor, "bandwidth": bw, "gbps": bw / GIGA,
                     "knee_bytes": floor * bw, "r2": r2,
                     "fraction": bw / ceil if ceil else np.nan})
    return pd.DataFrame(rows)


def batchnorm_bytes(frame: pd.DataFrame | None, bandwidth: float | None) -> pd.DataFrame | None:
    """``batchnorm_sizes`` at its largest size, per layout and pass: the bytes its time implies at
    ``bandwidth`` (bytes/s, e.g. the copy ceiling) beside the persistent and two-pass models.

    ``implied_bytes`` = time_s × bandwidth, an upper bound of what the kernel moved if it ran no
    faster than ``bandwidth``; ``position``: 0 at the persistent model, 1 at the two-pass one;
    ``closer_to`` names the nearer; ``two_pass_ratio`` = bytes_two_pass / implied_bytes: above 1,
    the kernel moved fewer bytes than any two-pass kernel could have at that bandwidth.
    Pure: None in (no frame, or no bandwidth to compare with), None out.
    """
    if frame is None or bandwidth is None:
        return None
    bandwidth = positive_number("bandwidth", bandwidth)
    big = frame[frame["elements"] == frame["elements"].max()]
    out = big[["layout", "pass", "impl", "elements", "time_s", "bytes_persistent", "bytes_two_pass"]].copy()
    out["implied_bytes"] = implied = out["time_s"] * bandwidth
    out["position"] = (implied - out["bytes_persistent"]) / (out["bytes_two_pass"] - out["bytes_persistent"])
    out["closer_to"] = np.where(out["position"] < 0.5, "persistent", "two-pass")
    out["two_pass_ratio"] = out["bytes_two_pass"] / out["implied_bytes"]
    return out.reset_index(drop=True)


def layout_speedup(frame: pd.DataFrame | None, *, largest: bool = False) -> pd.DataFrame | None:
    """``batchnorm_sizes`` per size and pass (and 'forward+backward'): ``nchw_s``, ``nhwc_s`` (seconds)
    and ``speedup`` = NCHW time ÷ NHWC time (above 1: channels_last is faster). ``largest``: the
    largest size's rows only. Pure: None in, None out."""
    if frame is None:
        return None
    t = frame.pivot_table(index=["elements", "pass"], columns="layout", values="time_s", sort=False)
    if not {"NCHW", "NHWC"} <= set(t.columns):
        raise ValueError("layout_speedup needs both layouts, NCHW and NHWC, in the frame")
    both = t.groupby(level="elements").sum().assign(**{"pass": "forward+backward"}).set_index("pass", append=True)
    t = pd.concat([t, both]).sort_index(level="elements", sort_remaining=False)
    out = pd.DataFrame({"nchw_s": t["NCHW"], "nhwc_s": t["NHWC"]})
    out["speedup"] = out["nchw_s"] / out["nhwc_s"]
    out = out.reset_index()
    return out[out["elements"] == out["elements"].max()].reset_index(drop=True) if largest else out


_TABLE = (("ReLU", "relu", {}), ("GELU", "gelu", {}), ("bias add", "bias", {}), ("residual add", "add", {}),
          ("dropout (1-byte mask)", "dropout", {}), ("batch norm, persistent", "batchnorm", {}),
          ("batch norm, two-pass", "batchnorm", {"persistent": False}),
          ("max pool 3×3/2, int64 indices", "maxpool", {"kernel_size": 3, "stride": 2, "padding": 1}),
          ("avg pool 3×3/2", "avgpool", {"kernel_size": 3, "stride": 2, "padding": 1}))


def byte_table(shape: Sequence[int], dtype: str = "float16", specs: Iterable[DeviceSpec] = ()) -> pd.DataFrame:
    """The byte model for one N×C×H×W tensor: per layer, ``forward_bytes``, ``backward_bytes`` (a max pool's
    forward with the int64 indices it writes in training) and both per input element; with ``specs``,
    ``"<device> forward_s"`` and ``"<device> backward_s"`` (:func:`perfkit.memory_model.memory_time`, seconds)."""
    specs = list(specs)
    if not all(isinstance(s, DeviceSpec) for s in specs):
        raise TypeError(f"specs must be DeviceSpecs (e.g. pk.device_spec('H100-SXM')), got {specs!r}")
    E = math.prod(_shape4("shape", shape))
    rows = []
    for name, kind, params in _TABLE:
        b = {p: layer_bytes(kind, shape, dtype, pass_=p, **params) for p in _PASSES}
        rows.append({"layer": name, "forward_bytes": b["forward"], "backward_bytes": b["backward"],
                     "forward_per_element": b["forward"] / E, "backward_per_element": b["backward"] / E}
                    | {f"{s.name} {p}_s": memory_time(b[p], s) for s in specs for p in _PASSES})
    return pd.DataFrame(rows)


def for_reader(frame: pd.DataFrame | None, columns: Sequence[str] | None = None, *,
               seconds: str | Mapping[str, str] | None = None) -> pd.DataFrame | None:
    """This chapter's frames for :func:`perfkit.table` (:func:`perfkit.book.reader.readable`)."""
    return readable(frame, columns, names=MEMORY_NAMES, seconds=seconds)
