"""Chapter 09's "Read your own profile": the roofline of a diagnosed trace and its table of time sinks.

Most tests draw a small report built here (op instances with known FLOPs, bytes and times on an H100),
so they need neither a GPU nor the published traces; the last ones draw the published H100 traces the
chapter shows, and skip, saying why, where ../shared is absent."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

import perfkit as pk
from perfkit.book.check_your_model import traces
from perfkit.book.interactive import MAX_HTML_BYTES, InteractiveFigure, figure_json, html_bytes
from perfkit.display import Note, Table
from perfkit.provenance import modelled
from perfkit.published_data import traces as pt
from perfkit.trace import OP_COLUMNS, TRACE_RULES, TraceReport
from figure_helpers import state_heading
from testkit import heading_text

H100 = pk.device_spec("H100-SXM")
SHARED_TRACES = Path(__file__).resolve().parents[3] / ".." / "shared" / "reference" / "traces"
needs_shared = pytest.mark.skipif(not SHARED_TRACES.is_dir(),
                                  reason=f"the published traces are not here ({pt.HOW_TO_GET})")


def _op(op, cls, shapes, flops, nbytes, time_s, predicted_s, rule="", fix="", saving_s=math.nan, step=1):
    row = dict.fromkeys(OP_COLUMNS, math.nan)
    row.update(rank=0, step=step, op=op, layer="", **{"pass": "forward", "class": cls}, shapes=shapes,
               dtype="bfloat16" if cls != "unmapped" else "", flops=flops, bytes=nbytes, time_s=time_s,
               kernels=1, kernel="k", predicted_s=predicted_s, ratio=time_s / predicted_s if predicted_s else math.nan,
               achieved_flop_s=flops / time_s, achieved_Bps=nbytes / time_s, bound="", rule=rule, fix=fix,
               saving_s=saving_s, start_s=0.0, assumed="")
    return row


def _report(steps=(1,), spec=H100, name="mine.json") -> TraceReport:
    """Per step: two GEMMs (one of them unaligned), a memory-bound chain of two ops and an unmapped copy."""
    rows = []
    for s in steps:
        rows += [_op("aten::addmm", "gemm", "4096x4096 @ 4096x4096", 2 * 4096 ** 3, 3 * 2 * 4096 ** 2, 200e-6,
                     180e-6, step=s),
                 _op("aten::addmm", "gemm", "4096x4095 @ 4095x4096", 2 * 4096 ** 2 * 4095, 3 * 2 * 4096 ** 2,
                     600e-6, 190e-6, "alignment", "pad K 4095 → 4096", 410e-6, step=s),
                 _op("aten::gelu", "memory", "64x4096", 64 * 4096, 4 * 64 * 4096, 10e-6, 6e-6, "fusion",
                     "fuse this chain", 3e-6, step=s),
                 _op("aten::add", "memory", "64x4096", 64 * 4096, 6 * 64 * 4096, 8e-6, 6e-6, "fusion",
                     "fuse this chain", 2e-6, step=s),
                 _op("aten::copy_", "unmapped", "", math.nan, math.nan, 50e-6, math.nan, "unmapped", step=s)]
    ops = pd.DataFrame(rows, columns=list(OP_COLUMNS))
    return TraceReport([Path(name)], spec, ops, pd.DataFrame(), pd.DataFrame(), summary={})


def _points(fig: InteractiveFigure) -> list[dict]:
    """The figure's marker traces (the roofs are the last two)."""
    return figure_json(fig)["data"][:-2]


# ------------------------------------------------------------------------------------------ the roofline
def test_every_op_instance_with_flops_is_one_point_at_its_intensity_and_rate():
    report = _report()
    fig = traces.plot_trace_roofline(report)
    assert isinstance(fig, InteractiveFigure) and fig.name == "trace-roofline"
    drawn = report.ops[report.ops["class"] != "unmapped"]
    xs = sorted(x for t in _points(fig) for x in t.get("x", []))
    ys = sorted(y for t in _points(fig) for y in t.get("y", []))
    assert xs == pytest.approx(sorted(drawn["flops"] / drawn["bytes"]), rel=1e-4)
    assert ys == pytest.approx(sorted(drawn["achieved_flop_s"]), rel=1e-4)
    by_name = {t["name"]: len(t["x"]) for t in _points(fig) if t.get("x")}
    assert by_name == {"alignment (1)": 1, "fusion (2)": 2, "no finding (1)": 1}


def test_hover_says_op_shapes_measured_predicted_rule_and_fix():
    fig = traces.plot_trace_roofline(_report())
    text = next(t for t in _points(fig) if t["name"].startswith("alignment"))["text"][0]
    for part in ("addmm", "4096x4095 @ 4095x4096", "bfloat16", "measured 600 µs", "predicted 190 µs",
                 "alignment: pad K 4095 → 4096"):
        assert part in text, (part, text)


def test_the_roofs_are_the_datasheet_and_the_achievable_ones():
    fig = traces.plot_trace_roofline(_report())
    sheet, achievable = figure_json(fig)["data"][-2:]
    assert max(sheet["y"]) == pytest.approx(H100.peak_flop_s("bfloat16"), rel=1e-4)
    assert sheet["y"][0] / sheet["x"][0] == pytest.approx(H100.mem_bandwidth, rel=1e-3)
    assert max(achievable["y"]) == pytest.approx(H100.ceilings.flop_s_for("bfloat16"), rel=1e-4)
    assert achievable["y"][0] / achievable["x"][0] == pytest.approx(H100.ceilings.bandwidth, rel=1e-3)
    assert "datasheet" in sheet["name"] and "achievable" in achievable["name"]


def test_the_heading_says_what_was_measured_and_what_predicted():
    fig = traces.plot_trace_roofline(_report(), sources={"mine.json": "live on a test GPU"})
    title = " ".join(heading_text(fig).replace("<br>", " ").split())
    assert "live on a test GPU" in title and str(modelled(H100)) in title
    annotation = fig.figure.layout.annotations[0].text
    drawn = 4 * (200 + 600 + 10 + 8) / (4 * (200 + 600 + 10 + 8 + 50))
    assert annotation.startswith("4 op instances") and pk.units.format_percent(drawn) in annotation


def test_one_report_switches_between_rule_and_class_several_between_reports():
    one = traces.plot_trace_roofline(_report())
    assert one.states == ["mine.json", "mine.json, by class"]
    buttons = figure_json(one)["layout"]["updatemenus"][0]["buttons"]
    names = [n for n in buttons[1]["args"][0]["name"] if not n.startswith(" ")]
    assert "gemm (2)" in names and "memory (2)" in names
    two = traces.plot_trace_roofline({"a": _report(), "b": _report(name="other.json"), "gone": None})
    assert two.states == ["a", "b"] and html_bytes(two) < MAX_HTML_BYTES
    assert len(figure_json(two)["data"]) == len([r for r in TRACE_RULES if r != "unmapped"]) + 1 + 2


def test_one_step_is_drawn_the_last_by_default():
    report = _report(steps=(3, 4))
    report.ops.loc[report.ops["step"] == 4, "time_s"] *= 2
    fig = traces.plot_trace_roofline(report)
    assert "step 4 of 2" in fig.figure.layout.annotations[0].text
    assert sum(len(t["x"]) for t in _points(fig)) == 4
    assert "step 3 of 2" in traces.plot_trace_roofline(report, step=3).figure.layout.annotations[0].text
    with pytest.raises(LookupError, match=r"\[3, 4\]"):
        traces.plot_trace_roofline(report, step=7)


def test_nothing_to_draw_is_a_note_saying_why():
    absent = traces.plot_trace_roofline({"ViT-base, H100": None}, instead="your own trace")
    assert isinstance(absent, Note) and pt.HOW_TO_GET in absent.text and absent.instead == "your own trace"
    cpu = traces.plot_trace_roofline(_report(spec=None))
    assert isinstance(cpu, Note) and "no GPU kernels" in cpu.text


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError, match="TraceReport"):
        traces.plot_trace_roofline("trace.json")
    with pytest.raises(TypeError, match="TraceReport"):
        traces.plot_trace_roofline({"a": "trace.json"})
    with pytest.raises(TypeError, match="names"):
        traces.plot_trace_roofline({1: _report()})
    with pytest.raises(TypeError, match="TraceReport"):
        traces.top_sinks(None)
    with pytest.raises((TypeError, ValueError), match="n"):
        traces.top_sinks(_report(), 0)


# ---------------------------------------------------------------------------------------- the time sinks
def test_top_sinks_are_the_reports_top_as_the_chapter_shows_them():
    report = _report()
    sinks = traces.top_sinks(report, 3)
    top = report.top(3)
    assert list(sinks.columns) == ["op", "shapes", "time_s", "share", "predicted_s", "fix", "saving_s"]
    assert list(sinks["op"]) == ["addmm ×1", "addmm ×1", "copy ×1"]
    assert list(sinks["time_s"]) == list(top["time_s"]) and list(sinks["share"]) == list(top["share"])
    assert sinks["fix"].iloc[0] == "alignment: pad K 4095 → 4096" and sinks["fix"].iloc[1] == "–"
    assert sinks["saving_s"].iloc[0] == pytest.approx(410e-6) and sinks["saving_s"].iloc[1:].isna().all()
    assert math.isnan(sinks["predicted_s"].iloc[2])  # the unmapped copy: no model, not "0 s"


def test_sinks_table_is_captioned_with_both_sources_in_one_unit():
    table = traces.sinks_table(_report(), 4, source="live on a test GPU")
    assert isinstance(table, Table)
    assert table.caption.startswith("mine.json: the 4 largest time sinks; kernel times: live on a test GPU")
    assert str(modelled(H100)) in table.caption
    assert list(table.shown.columns) == ["op", "shapes", "time (µs)", "share", "predicted (µs)", "fix",
                                         "saving (µs)"]
    assert table.rows()[0][2] == "600.0" and table.rows()[0][3] == "69%"  # 600 of 868 µs
    absent = traces.sinks_table(None)
    assert isinstance(absent, Note) and pt.HOW_TO_GET in absent.text


# ---------------------------------------------------------------- the chapter's traces (skip without them)
@pytest.fixture(scope="module")
def published(request):
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"the published traces are not here ({pt.HOW_TO_GET})")
    mp = pytest.MonkeyPatch()
    mp.setenv(pt.ENV, str(SHARED_TRACES))
    request.addfinalizer(mp.undo)
    return {"ViT-base, H100": traces.diagnosed("h100_vit_base"),
            "BERT-small, H100": traces.diagnosed("h100_bert_small")}


@needs_shared
def test_the_chapters_figure_draws_every_op_with_flops_of_both_traces(published):
    fig = traces.plot_trace_roofline(published)
    assert fig.states == list(published) and html_bytes(fig) < MAX_HTML_BYTES
    buttons = figure_json(fig)["layout"]["updatemenus"][0]["buttons"]
    for button, report in zip(buttons, published.values()):
        ops = report.ops
        with_flops = ops[(ops["flops"] > 0) & (ops["class"] != "unmapped")]
        assert sum(len(x) for x in button["args"][0]["x"][:-2]) == len(with_flops)
        title = state_heading(fig, button["args"][1]).replace("<br>", " ")
        assert "published by AMD TraceLens" in " ".join(title.split())
        assert report.spec.name == "H100-SXM" and traces.trace_name(report) in pt.TRACES


@needs_shared
def test_the_chapters_table_rests_on_the_published_trace_and_the_model(published):
    vit = published["ViT-base, H100"]
    table = traces.sinks_table(vit, 5)
    caption = " ".join(table.caption.split())
    assert caption.startswith(pt.TRACES["h100_vit_base"].ran)
    assert "published by AMD TraceLens, measured on NVIDIA H100 80GB HBM3" in caption
    assert "model of H100-SXM" in caption and len(table.frame) == 5
    assert table.frame["time_s"].is_monotonic_decreasing
