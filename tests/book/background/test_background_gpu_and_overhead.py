"""Chapter 01_background's GPU diagram (every number the spec's) and its overhead section (what
issuing a tiny kernel costs, each row with its source)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import perfkit as pk  # noqa: E402
from perfkit.book.background import diagrams, overhead  # noqa: E402
from perfkit.book.background.figures import plot_dispatch_costs  # noqa: E402
from perfkit.book.figures import BookFigure  # noqa: E402
from perfkit.calibration.profile import DeviceProfile  # noqa: E402


def _texts(fig) -> str:
    return "\n".join(t.get_text() for ax in fig.axes for t in ax.texts) + "\n" + fig._suptitle.get_text()


# --------------------------------------------------------------------------------------------
# The diagram


def test_plot_gpu_draws_the_h100_by_default_with_its_datasheet_numbers():
    fig = diagrams.plot_gpu()
    assert isinstance(fig, BookFigure) and fig.get_figwidth() == pytest.approx(7.5)
    text = _texts(fig)
    h100 = pk.device_spec("H100-SXM")
    for said in ("132 SMs", "SM\n131", "L2 cache: 50 MiB", "80 GB", "3.35 TB/s", "989 TFLOP/s float16",
                 "66.9 float32", "ridge: 295 FLOP/byte", "warp scheduler", "Tensor Core", "registers",
                 "L1 cache / shared memory"):
        assert said in text, said
    assert f"{h100.peak_flop_s('float16') / h100.sms / 1e12:.2g} TFLOP/s float16" in text  # per SM
    (title, source), = fig.captions
    assert "diagram" in source and h100.sources["peaks"] in source
    assert fig.to_png()[:4] == b"\x89PNG"


@pytest.mark.parametrize("name", ["A100-SXM4-80GB", "V100-SXM2", "T4"])
def test_plot_gpu_reads_every_number_from_the_spec(name):
    spec = pk.device_spec(name)
    text = _texts(diagrams.plot_gpu(spec))
    assert f"{spec.sms} SMs" in text and f"SM\n{spec.sms - 1}" in text and f"SM {spec.sms - 1}, expanded" in text
    assert f"L2 cache: {spec.l2_bytes / 2**20:,.0f} MiB" in text
    assert f"{spec.memory_bytes / 1e9:,.0f} GB" in text
    assert f"{spec.mem_bandwidth / 1e12:.3g} TB/s" in text
    assert f"{spec.peak_flop_s('float16') / 1e12:,.0f} TFLOP/s float16" in text
    assert f"ridge: {spec.ops_per_byte('float16'):,.0f} FLOP/byte" in text
    if name.startswith("A100"):
        assert "108 SMs" in text and "132" not in text


def test_plot_gpu_rejects_what_is_not_a_gpu_spec():
    with pytest.raises(TypeError, match="DeviceSpec"):
        diagrams.plot_gpu("H100-SXM")
    with pytest.raises(TypeError, match="DeviceSpec"):
        diagrams.plot_gpu(132)
    cpu = pk.devices.DeviceSpec(name="CPU", kind="cpu", sms=2, mem_bandwidth=1e10, l2_bytes=None,
                                memory_bytes=None)
    with pytest.raises(ValueError, match="GPU"):
        diagrams.plot_gpu(cpu)


def test_plot_gpu_says_what_a_spec_does_not_know():
    bare = pk.devices.DeviceSpec(name="X1", kind="gpu", sms=4, mem_bandwidth=None, l2_bytes=None,
                                 memory_bytes=None)
    text = _texts(diagrams.plot_gpu(bare))
    assert "L2 cache (size unknown)" in text and "size unknown" in text and "TB/s" not in text
    assert "4 SMs" in text


# --------------------------------------------------------------------------------------------
# What issuing a tiny kernel costs


def _timers() -> pd.DataFrame:
    frame = pd.DataFrame({"case": ["elementwise add, 4 MiB fp32", "gemm 2048³ bfloat16"],
                          "torch_timer_s": [7.3e-6, 26e-6], "perfkit_graph_time_s": [2.0e-6, 24e-6]})
    frame.attrs["meta"] = {"device_name": "NVIDIA H200", "recorded_at": "2026-11-26T01:42:53+00:00",
                           "complete": True}
    return frame


def _small() -> pd.DataFrame:
    rows = [{"device": "H200", "variant": v, "bytes_moved": b, "block_size": 256, "time_s": t + b / 3e12,
             "gbps": b / (t + b / 3e12) / 1e9}
            for v, t in (("launch", 2.4e-6), ("graph", 1.3e-6)) for b in (64e3, 128e3, 1e6, 1e9)]
    frame = pd.DataFrame(rows)
    frame.attrs["meta"] = {"device_name": "NVIDIA H200", "published_by": "gpu-benches (Dominik Ernst)",
                           "published_date": "2024"}
    return frame


def _profile(graph_s: float = 0.9e-6) -> DeviceProfile:
    found = pk.book.timing.book_gpu_profile()
    if found is None:
        pytest.skip("no GPU calibration profile in data/")
    profile = found[0]
    return DeviceProfile(**{**{f: getattr(profile, f) for f in profile.__dataclass_fields__},
                            "latency": {**profile.latency, "graph_s": graph_s}})


def test_dispatch_costs_reads_each_source_and_labels_each_row():
    costs = overhead.dispatch_costs(_timers(), _profile(), _small())
    assert list(costs.columns) == ["how", "issued", "time_s", "source", "by"]
    assert list(costs["time_s"]) == sorted(costs["time_s"], reverse=True)  # slowest first
    by_how = costs.set_index("how")
    assert by_how.loc["torch.add of 4 MiB, from Python", "time_s"] == pytest.approx(7.3e-6)
    assert by_how.loc["the same add, in a CUDA graph", "time_s"] == pytest.approx(2.0e-6)
    assert by_how.loc["a one-element add, in a CUDA graph", "time_s"] == pytest.approx(0.9e-6)
    floor = pk.book.timing.published.launch_floor_s
    assert by_how.loc["a tiny kernel, launched from C++", "time_s"] == pytest.approx(floor(_small(), "launch"))
    assert by_how.loc["a tiny kernel, in a CUDA graph", "time_s"] == pytest.approx(floor(_small(), "graph"))
    kinds = {h: (s.kind, b) for h, s, b in zip(costs["how"], costs["source"], costs["by"])}
    assert kinds["torch.add of 4 MiB, from Python"] == ("recorded", "ours")
    assert kinds["a tiny kernel, in a CUDA graph"] == ("published", "gpu-benches")
    assert overhead.python_op_s(_timers()) == pytest.approx(7.3e-6)


def test_dispatch_costs_keeps_what_is_given_and_none_without_anything():
    assert overhead.dispatch_costs() is None
    assert overhead.dispatch_costs(None, None, None) is None
    assert overhead.python_op_s(None) is None
    only = overhead.dispatch_costs(small=_small())
    assert set(only["by"]) == {"gpu-benches"} and len(only) == 2
    no_add = _timers().iloc[1:]
    no_add.attrs = _timers().attrs
    assert overhead.dispatch_costs(no_add) is None
    with pytest.raises(TypeError, match="timers"):
        overhead.dispatch_costs([1, 2])
    with pytest.raises(TypeError, match="profile"):
        overhead.dispatch_costs(profile="H200")


def test_plot_dispatch_costs_labels_every_bar_and_names_the_sources():
    costs = overhead.dispatch_costs(_timers(), small=_small())
    fig = plot_dispatch_costs(costs)
    (ax,) = fig.axes
    assert len(ax.patches) == len(costs)
    ticks = sorted(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels())))
    labels = [label for _, label in ticks]
    assert labels[-1] == "torch.add of 4 MiB, from Python [ours]"  # slowest on top
    assert any(lbl.endswith("[gpu-benches]") for lbl in labels)
    values = [t.get_text().strip() for t in ax.texts]
    assert pk.units.format_time(7.3e-6) in values
    (title, source), = fig.captions
    assert "NVIDIA H200" in title
    assert "ours: recorded on NVIDIA H200 on 2026-11-26" in source and "gpu-benches: published by" in source
    assert np.isclose(max(p.get_width() for p in ax.patches), 7.3e-6)


def test_plot_dispatch_costs_without_data_is_a_note():
    note = plot_dispatch_costs(None, pk.provenance.missing("no recording"))
    assert isinstance(note, pk.display.Note)
