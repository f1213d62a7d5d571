"""Interactive figures of chapter 08_communication (see perfkit.book.interactive).

:func:`bus_bandwidth`: a slider over the number of GPUs. The bus bandwidth the α-β model predicts for an
all-reduce against the message size, for H100s with NVLink 4 in nodes of 8 joined by InfiniBand NDR (a
ring, a tree, and NVLS while the GPUs fit in one node) and for PCIe cards joined by 100 GbE, each with a
marker where its latency term equals its transfer term (:func:`perfkit.collectives.explain_collective`).

:func:`data_parallel`: a slider over the batch per GPU. One data-parallel step of GPT-2 small per setup
(:func:`perfkit.book.communication.analysis.data_parallel_sweep`): its compute, and the part of the
gradients' all-reduce that the backward pass does not hide. Seconds, bytes, 1e9 bytes/s.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import plotly.graph_objects as go

from ..._validate import positive_int
from ...collectives import crossover_bytes, explain_collective
from ...devices import DeviceSpec, resolve_spec
from ...interconnects import link_spec
from ...provenance import Source
from ...units import format_time
from ..interactive import (InteractiveFigure, State, bars_with_slider, distinct_ints, heading, rounded,
                           slider_index, with_slider)
from .analysis import SIZES
from .training import DP_SETUPS, data_parallel_source, data_parallel_sweep
from .figures import binary_size

__all__ = ["BATCHES", "COUNTS", "FIGURES", "NETWORKS", "bus_bandwidth", "data_parallel"]

#: The GPU counts of :func:`bus_bandwidth`'s slider.
COUNTS: tuple[int, ...] = (2, 4, 8, 16, 32, 64, 128, 256, 512)
#: The batches per GPU of :func:`data_parallel`'s slider, sequences.
BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
#: :func:`bus_bandwidth`'s lines: name → (link in a node, link between nodes, GPUs per node, algorithm).
NETWORKS: dict[str, tuple[str, str, int, str]] = {
    "H100: NVLink 4, InfiniBand NDR between nodes; ring": ("nvlink4", "ib-ndr", 8, "ring"),
    "H100: the same, tree": ("nvlink4", "ib-ndr", 8, "tree"),
    "H100: NVLS (in-switch sum, one node only)": ("nvlink4", "ib-ndr", 8, "nvls"),
    "PCIe 4 cards, 100 GbE between nodes; ring": ("pcie4", "ethernet-100g", 8, "ring"),
}
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")


def _networks(networks: Any) -> dict[str, tuple[str, str, int, str]]:
    if not isinstance(networks, Mapping) or not networks:
        raise TypeError(f"networks must be a non-empty dict of name → (link, inter_link, ranks_per_node, "
                        f"algorithm), got {networks!r}")
    out = {}
    for name, value in networks.items():
        if not isinstance(value, (tuple, list)) or len(value) != 4:
            raise ValueError(f"networks[{name!r}] must be (link, inter_link, ranks_per_node, algorithm), got {value!r}")
        link, inter, per_node, algorithm = value
        link_spec(link), link_spec(inter)  # LookupError naming the known links
        out[str(name)] = (link, inter, positive_int(f"networks[{name!r}] ranks_per_node", per_node), algorithm)
    return out


def _predict(n: int, link: str, inter: str, per_node: int, algorithm: str, nbytes: float):
    """The prediction of one all-reduce, None where the algorithm cannot run (NVLS beyond one node)."""
    if algorithm == "nvls" and n > per_node:
        return None
    return explain_collective("all-reduce", nbytes, n, link, algorithm=algorithm, inter_link=inter,
                              ranks_per_node=per_node)


def bus_bandwidth(networks: Mapping[str, tuple[str, str, int, str]] = NETWORKS, *, counts: Sequence[int] = COUNTS,
                  sizes: Sequence[int] = SIZES, active: int | None = None) -> InteractiveFigure:
    """Predicted bus bandwidth of an all-reduce against the message size, one line per network of
    ``networks`` (name → (link in a node, link between nodes, GPUs per node, algorithm)), with a slider
    over ``counts`` (GPUs). A diamond marks the crossover (:func:`perfkit.collectives.crossover_bytes`)
    where it lies within ``sizes``. ``active``: the opening count's index (default: the one nearest 8)."""
    nets = _networks(networks)
    ns, xs = distinct_ints("counts", counts, 2, low=2), sorted(distinct_ints("sizes", sizes, 2))
    active = slider_index(active, ns, 8)
    traces = []
    for k, name in enumerate(nets):
        colour = _COLOURS[k % len(_COLOURS)]
        traces.append(go.Scatter(mode="lines", name=name, legendgroup=name, line={"color": colour, "width": 2},
                                 hovertemplate="%{x:.3s}B: %{y:.4s} GB/s busbw<extra></extra>"))
        traces.append(go.Scatter(mode="markers", name="crossover: latency = transfer", legendgroup=name,
                                 showlegend=k == 0, hovertemplate="crossover at %{x:.3s}B<extra></extra>",
                                 marker={"color": colour, "size": 11, "symbol": "diamond",
                                         "line": {"color": "black", "width": 1}}))
    states = []
    for n in ns:
        updates, notes = [], []
        for name, (link, inter, per_node, algorithm) in nets.items():
            preds = [_predict(n, link, inter, per_node, algorithm, s) for s in xs]
            if preds[0] is None:
                updates += [{"x": [], "y": []}, {"x": [], "y": []}]
                notes.append(f"{name}: needs all GPUs in one node (≤ {per_node})")
                continue
            updates.append({"x": xs, "y": rounded([p.bus_bytes_s / 1e9 for p in preds])})
            cross = crossover_bytes("all-reduce", n, link, algorithm=algorithm, inter_link=inter,
                                    ranks_per_node=per_node)
            at = _predict(n, link, inter, per_node, algorithm, cross)
            inside = xs[0] <= cross <= xs[-1]
            updates.append({"x": rounded([cross] if inside else []),
                            "y": rounded([at.bus_bytes_s / 1e9] if inside else [])})
            notes.append(f"{name}: crossover {binary_size(cross)}, {preds[-1].bus_bytes_s / 1e9:,.0f} GB/s at "
                         f"{binary_size(xs[-1])}")
        states.append(State(f"{n}", updates, {"annotations[0].text": f"{n} GPUs:<br>" + "<br>".join(notes)}))

    source = Source("model", "H100 SXM and PCIe GPUs over NVLink 4, PCIe 4, InfiniBand NDR and 100 GbE",
                    detail="α-β (perfkit.collectives), NCCL's link constants")
    layout = {
        **heading("All-reduce: predicted bus bandwidth against message size", source), "height": 600,
        "margin": {"t": 150, "l": 70, "r": 30, "b": 210},
        "xaxis": {"type": "log", "title": "message size (bytes, nccl-tests' count)", "exponentformat": "SI",
                  "ticksuffix": "B"},
        "yaxis": {"type": "log", "title": "predicted bus bandwidth, GB/s", "exponentformat": "SI"},
        "annotations": [{"text": "", "xref": "paper", "yref": "paper", "x": 0, "y": 1.02, "xanchor": "left",
                         "yanchor": "bottom", "align": "left", "showarrow": False}],
        "legend": {"orientation": "h", "x": 0, "y": -0.2},
    }
    fig = with_slider(traces, states, prefix="GPUs = ", active=active, layout=layout)
    fig.layout.sliders[0].update(y=-0.38, pad={"t": 40})
    alt = ("Predicted bus bandwidth of an all-reduce against the message size, on log axes, for H100s on NVLink 4 "
           "in nodes of 8 joined by InfiniBand NDR (ring, tree and in-switch NVLS) and for PCIe 4 cards joined by "
           "100 GbE. Each line rises in proportion to the size while latency dominates, bends at its crossover "
           "(a diamond) and flattens at the bandwidth of its slowest link. Moving the GPU-count slider beyond 8 "
           "takes the ring across the network: its plateau drops to the NIC's bandwidth and its crossover moves "
           "to larger messages, since a ring pays one latency per GPU; the tree's crossover moves far less, and "
           "NVLS disappears, as it needs every GPU on one switch.")
    return InteractiveFigure(fig, alt=alt, name="communication-bus-bandwidth")


def data_parallel(spec: str | DeviceSpec = "H100-SXM", *, setups: Mapping[str, tuple] | None = None,
                  batches: Sequence[int] = BATCHES, active: int | None = None) -> InteractiveFigure:
    """One data-parallel step of GPT-2 small on ``spec`` per setup (default: the chapter's
    :data:`~perfkit.book.communication.analysis.DP_SETUPS`), split into forward + backward and the
    all-reduce left exposed after it, with a slider over ``batches`` (sequences of 1024 tokens per
    GPU). ``active``: the opening batch's index (default: the one nearest 8)."""
    spec = resolve_spec(spec, none_ok=False)
    chosen = dict(DP_SETUPS if setups is None else setups)
    if not chosen:
        raise ValueError("setups must name at least one setup")
    bs = distinct_ints("batches", batches, 2)
    active = slider_index(active, bs, 8)
    frame = data_parallel_sweep(spec, batches=bs, setups=chosen)
    names = list(chosen)
    traces = [go.Bar(orientation="h", y=names, name="forward + backward", marker={"color": "#1f77b4"},
                     hovertemplate="compute: %{x:.3s}s<extra></extra>"),
              go.Bar(orientation="h", y=names, name="all-reduce not hidden by the backward pass",
                     marker={"color": "#d62728"}, hovertemplate="exposed: %{x:.3s}s<extra></extra>"),
              go.Scatter(mode="text", y=names, textposition="middle right", showlegend=False, hoverinfo="skip")]
    states = []
    for b in bs:
        rows = frame[frame["batch"] == b].set_index("setup").loc[names]
        compute = (rows["forward_s"] + rows["backward_s"]).tolist()
        exposed, steps = rows["exposed_s"].tolist(), rows["step_s"].tolist()
        text = [f" {format_time(t)}, {share:.0%} exposed" for t, share in zip(steps, rows["comm_share"])]
        first = rows.iloc[0]
        note = (f"batch {b} × 1024 tokens per GPU: backward {format_time(first['backward_s'])} (6N rule); "
                f"{first['gradient_bytes'] / 1e6:,.0f} MB of fp32 gradients in {int(first['buckets'])} buckets of "
                "25 MiB")
        states.append(State(f"{b}", [{"x": rounded(compute)}, {"x": rounded(exposed)},
                                     {"x": rounded(steps), "text": text}],
                            {"annotations[0].text": note, "xaxis.range": [0, 1.6 * max(steps)]}))
    fig = bars_with_slider(traces, states, prefix="batch per GPU = ", active=active,
                           head=heading("Data parallel: one training step of GPT-2 small", data_parallel_source(spec)),
                           x_title="predicted time per step", height=428, left=230)
    alt = (f"Horizontal bars of one predicted data-parallel training step of GPT-2 small on {spec.name}s, per "
           "setup (8 GPUs on NVLink in one node; 64 GPUs in 8 nodes over InfiniBand NDR; the same over 100 GbE): "
           "the forward and backward compute, and the part of the gradients' all-reduce that the backward pass "
           "does not hide. Moving the batch-per-GPU slider grows the compute in proportion while the gradients "
           "stay the same size, so the exposed all-reduce shrinks: within a node it is nearly hidden from a batch "
           "of 8, across InfiniBand from 64, over 100 GbE only at 128.")
    return InteractiveFigure(fig, alt=alt, name="communication-data-parallel")


#: name → a function that builds the figure with its defaults (the tests build each one).
FIGURES: dict[str, Callable[[], InteractiveFigure]] = {"bus_bandwidth": bus_bandwidth,
                                                       "data_parallel": data_parallel}
