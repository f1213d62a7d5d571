"""Chapter 01_background's newest GPUs: Blackwell and AMD Instinct in the device menu, on the static
roofline, and side by side with their published best GEMM (every datasheet number read from the spec)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

import perfkit as pk  # noqa: E402
from perfkit.book.background import interactive, newest  # noqa: E402
from perfkit.book.background.figures import plot_roofline  # noqa: E402
from perfkit.display import Table  # noqa: E402
from perfkit.published_data import HOW_TO_GET  # noqa: E402
from testkit import framed  # noqa: E402

META = {"published_by": "ml-engineering (Stas Bekman)", "published_date": "2025", "timing": "the best shape's mean",
        "caveat": "A max over many noisy means is optimistic."}


def _mamf(values: dict[str, float]):
    """A MAMF-like table: one BF16 row per GPU, ``values`` its TFLOP/s."""
    return framed([{"source": "s", "device": g, "dtype": "bfloat16", "tflops_best": v, "M": 1, "N": 2, "K": 3}
                   for g, v in values.items()], META)


def test_the_menu_offers_then_now_and_next_each_with_its_generation():
    for gpu in ("B200", "MI300X"):
        assert gpu in interactive.BOOK_GPUS
    labels = interactive.roofline_by_device().states
    assert "B200 (Blackwell)" in labels and "MI300X (AMD CDNA 3)" in labels and "MI355X (AMD CDNA 4)" in labels
    assert interactive.menu_label(pk.device_spec("V100-SXM2")) == "V100-SXM2 (Volta)"
    bare = pk.devices.DeviceSpec(name="X1", kind="gpu", sms=4, mem_bandwidth=1e12, l2_bytes=None, memory_bytes=None)
    assert interactive.menu_label(bare) == "X1"  # a GPU of no known generation: its name alone


def test_ridge_is_the_datasheet_peak_over_the_bandwidth():
    for gpu in newest.NEXT_GPUS:
        spec = pk.device_spec(gpu)
        assert newest.ridge(gpu) == pytest.approx(spec.peak_flop_s("bfloat16") / spec.mem_bandwidth)
        assert newest.ridge(spec, "float8") == pytest.approx(spec.ops_per_byte("float8"))


def test_newest_table_reads_every_datasheet_number_from_the_spec():
    b200, mi300x = pk.device_spec("B200"), pk.device_spec("MI300X")
    t = newest.newest_table(_mamf({"B200": 1700.0, "MI300X": 600.0})).set_index("GPU")
    assert list(t.index) == list(newest.NEXT_GPUS)
    assert t.loc["MI300X", "units"] == f"{mi300x.sms} CUs, {mi300x.dies} dies" and t.loc["MI300X", "warp"] == 64
    assert t.loc["B200", "units"] == f"{b200.sms} SMs" and t.loc["B200", "warp"] == 32
    assert t.loc["MI300X", "caches (MiB)"] == f"{mi300x.l2_bytes / 2**20:,.0f} + {mi300x.llc_bytes / 2**20:,.0f}"
    assert t.loc["B200", "caches (MiB)"] == f"{b200.l2_bytes / 2**20:,.0f}"
    assert t.loc["B200", "BF16 TFLOP/s"] == f"{b200.peak_flop_s('bf16') / 1e12:,.0f}"
    assert t.loc["B200", "ridge"] == f"{b200.ops_per_byte('bf16'):,.0f}"
    share = 600e12 / mi300x.peak_flop_s("bf16")
    assert t.loc["MI300X", "best GEMM"] == f"600 ({share:.0%})"
    assert t.loc["MI355X", "best GEMM"] == "—"  # not in this table


def test_show_newest_captions_each_part_and_without_the_table_says_how_to_get_it(capsys):
    shown = newest.show_newest(_mamf({"B200": 1700.0}))
    assert isinstance(shown, Table)
    assert "the rest: datasheets" in shown.caption and META["published_by"] in shown.caption
    assert META["timing"] in shown.caption
    alone = newest.show_newest(None)
    assert "best GEMM" not in alone.shown.columns and "ridge" in alone.shown.columns
    assert HOW_TO_GET in " ".join(capsys.readouterr().out.split())
    with pytest.raises(TypeError, match="gpus"):
        newest.newest_table(None, "B200")
    with pytest.raises(LookupError):
        newest.newest_table(None, ["no-such-gpu"])


def test_a_roofline_of_three_gpus_says_the_ridges_in_its_legend():
    ops = pk.roofline.nvidia_example_operations("float16")
    specs = [pk.device_spec(g) for g in ("H200", "B200", "MI300X")]
    fig = plot_roofline(ops, specs, "float16")
    (ax,) = fig.axes
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for spec, text in zip(specs, legend):
        assert text.startswith(spec.label) and text.endswith(f"ops:byte {spec.ops_per_byte('float16'):.3g}")
    assert not [t for t in ax.texts if t.get_text().startswith("ops:byte")]  # none beside the points
    two = plot_roofline(ops, specs[:2], "float16").axes[0]
    assert len([t for t in two.texts if t.get_text().startswith("ops:byte")]) == 2


@pytest.mark.published
def test_the_published_best_gemms_sit_below_every_datasheet():
    t = newest.newest_table(pk.published("mamf_newest")).set_index("GPU")
    assert (t["best GEMM"] != "—").all()
    shares = [float(v.split("(")[1].rstrip("%)")) for v in t["best GEMM"]]
    assert all(0 < s < 100 for s in shares)
