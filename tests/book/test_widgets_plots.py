import base64

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from perfkit.book.background.figures import plot_roofline, plot_tile_waves  # noqa: E402
from perfkit.provenance import Source, caption, modelled  # noqa: E402
from perfkit.roofline import gemm_operation, nvidia_example_operations  # noqa: E402
from perfkit.book.widgets import gemm_explorer, roofline_explorer  # noqa: E402
from testkit import A100, H100, V100, heading_text  # noqa: E402

PNG = b"\x89PNG"


def _texts(ax):
    return [t.get_text() for t in ax.texts] + [heading_text(ax)]


def test_plot_roofline_two_devices_with_table_1():
    ops = nvidia_example_operations()
    fig = plot_roofline(ops, [H100, A100], "float16", source="recorded on NVIDIA H100 80GB HBM3 on 2026-11-20")
    assert isinstance(fig, matplotlib.figure.Figure)
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "TFLOP/s" in ax.get_ylabel() and "FLOP/byte" in ax.get_xlabel()
    assert "recorded on NVIDIA H100 80GB HBM3 on 2026-11-20" in heading_text(ax)
    texts = _texts(ax)
    for op in ops:
        assert op.name in texts
    assert "ops:byte 295" in texts and "ops:byte 153" in texts
    labels = [line.get_label() for line in ax.get_lines()]
    assert any(lab.startswith("H100-SXM: 989.4 TFLOP/s") for lab in labels)
    assert any(lab.startswith("A100-SXM4-80GB: 312.0 TFLOP/s") for lab in labels)
    # Each operation sits on each device's roof: 5 ops × 2 devices square markers.
    squares = [line for line in ax.get_lines() if line.get_marker() == "s"]
    assert len(squares) == 10
    relu = [line for line in squares if line.get_xdata()[0] == 0.25]
    assert sorted(line.get_ydata()[0] for line in relu) == pytest.approx(sorted([0.25 * 3350e9 / 1e12,
                                                                                 0.25 * 2039e9 / 1e12]))


def test_plot_roofline_single_spec_default_source_and_ceiling():
    fig, ax = plt.subplots()
    out = plot_roofline([gemm_operation(8192, 128, 8192, "float16")], H100, ax=ax,
                        ceilings={"label": "measured cuBLAS", "flop_s": 700e12, "bandwidth": 3.0e12})
    assert out is fig
    assert str(modelled(H100)) in heading_text(ax) and "datasheet" in heading_text(ax)
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and dashed[0].get_label().startswith("measured cuBLAS: 700.0 TFLOP/s")
    assert max(dashed[0].get_ydata()) == pytest.approx(700)
    with pytest.raises(ValueError, match="ceilings must be a mapping"):
        plot_roofline([], H100, ceilings={"flop_s": 1e12})
    with pytest.raises(TypeError, match="specs must be a DeviceSpec"):
        plot_roofline([], "H100")
    with pytest.raises(LookupError, match="no peak for dtype 'float8'"):
        plot_roofline([], A100, "float8")


def test_plot_roofline_default_caption_names_every_spec():
    title = heading_text(plot_roofline([], [H100, A100]).axes[0])
    assert caption([modelled(H100), modelled(A100)]) in title
    assert "A100 datasheet" in title and "H100 datasheet" in title


def test_plot_tile_waves():
    fig = plot_tile_waves(2304, 1537, (256, 128), 108, source=modelled(A100))
    (ax,) = fig.axes
    title = heading_text(ax)
    assert "117 tiles of 256×128 in 2 waves of 108" in title and "54.2% utilization" in title
    assert str(modelled(A100)) in title
    assert ax.images[0].get_array().shape == (9, 13)
    assert "model of a GPU with 8 SMs" in heading_text(plot_tile_waves(12, 1, (1, 1), 8).axes[0])
    source = Source("model", "A100-SXM4-80GB", detail="forced tiles")
    fig = plot_tile_waves(12, 1, (1, 1), 8, source=source)
    assert "model of A100-SXM4-80GB: forced tiles" in heading_text(fig.axes[0])
    with pytest.raises(TypeError, match="source must be"):
        plot_tile_waves(12, 1, (1, 1), 8, source=3)


def _png_outputs(out):
    assert isinstance(out, widgets.Output) and len(out.outputs) == 1
    data = out.outputs[0]["data"]["image/png"]
    assert base64.b64decode(data).startswith(PNG)
    return data


def _parts(w):
    controls, text, out = w.children
    return {c.description: c for c in controls.children}, text, out


def test_roofline_explorer_draws_and_updates():
    w = roofline_explorer(A100, reference="H100-SXM")
    assert isinstance(w, widgets.VBox)
    controls, text, out = _parts(w)
    assert set(controls) == {"M", "N", "K", "dtype"}
    assert controls["M"].max == 65536 and controls["M"].min == 1
    assert "float8" not in controls["dtype"].options  # A100 has no float8 peak
    assert controls["dtype"].value == "float16"
    first = _png_outputs(out)
    assert "intensity 124.1 FLOP/B" in text.value
    assert "A100-SXM4-80GB: memory-bound" in text.value and "H100-SXM: memory-bound" in text.value
    controls["N"].value = 8192
    assert "intensity 2,730.7 FLOP/B" in text.value and "math-bound" in text.value
    assert _png_outputs(out) != first


def test_roofline_explorer_dtype_fallback():
    w = roofline_explorer(V100, reference=H100, dtype="bfloat16")
    controls, _, _ = _parts(w)
    assert controls["dtype"].value == "float16"  # V100 has no bfloat16 peak: closest size
    assert list(controls["dtype"].options) == ["float64", "float32", "float16"]


def test_gemm_explorer_with_measure():
    calls = []

    def measure(M, N, K, dtype):
        calls.append((M, N, K, dtype))
        return 100e-6

    w = gemm_explorer(A100, measure=measure)
    controls, text, out = _parts(w)
    assert set(controls) == {"M", "N", "K", "dtype", "tile"}
    assert controls["tile"].options[0] == "auto" and "64×64" in controls["tile"].options
    _png_outputs(out)
    assert calls == [(2304, 1536, 4096, "float16")]
    assert "108 tiles in 1 wave(s)" in text.value and "measured" in text.value and "model error" in text.value
    controls["tile"].value = "256×128"
    controls["N"].value = 1537
    assert "117 tiles in 2 wave(s)" in text.value and "54.2%" in text.value
    assert calls[-1] == (2304, 1537, 4096, "float16")


def test_gemm_explorer_without_measure_and_failing_measure():
    w = gemm_explorer(H100)
    _, text, out = _parts(w)
    _png_outputs(out)
    assert "predicted" in text.value and "measured" not in text.value
    assert "tile-shape factor (modelling assumption)" in text.value
    assert plt.get_fignums() == []  # the widget's figures are not pyplot's, so a notebook shows each once

    def broken(*args):
        raise RuntimeError("no GPU")

    _, text, _ = _parts(gemm_explorer(H100, measure=broken))
    assert "failed: RuntimeError: no GPU" in text.value
    with pytest.raises(TypeError, match="measure must be a callable"):
        gemm_explorer(H100, measure=3)
    with pytest.raises(LookupError, match="unknown device name"):
        gemm_explorer("B999")
