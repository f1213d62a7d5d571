"""What a chapter shows: figures that show themselves once, notes, tables and the device card."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

import perfkit as pk
from perfkit import book
from perfkit.display import Note, Table
from perfkit.book.figures import BookFigure, book_figure, new_figure
from perfkit.provenance import missing, modelled
from perfkit.units import format_rate
from testkit import H100

PNG = b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------------------------
# Figures: shown by their repr, whatever the backend, exactly once


def test_a_figure_function_returns_a_figure_that_shows_itself_as_png():
    fig = book.background.plot_wave_model(H100.sms, source=modelled(H100))
    assert isinstance(fig, BookFigure)
    png = fig._repr_png_()
    assert png.startswith(PNG) and len(png) > 10_000
    # pyplot does not know it: no backend (Agg, inline) shows it a second time
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        assert fig not in [pyplot.figure(n) for n in pyplot.get_fignums()]


def test_ipython_shows_a_figure_as_png_without_the_inline_backend():
    from IPython.core.formatters import DisplayFormatter

    fig = new_figure()[0]
    data, _ = DisplayFormatter().format(fig)
    assert data["image/png"].startswith(PNG)


def test_book_figure_passes_instead_to_its_note_only():
    @book_figure
    def draw(frame, source=None):
        return book.figures.no_data(frame, source)

    note = draw(None, missing("no GPU here"), instead="the model, drawn above")
    assert isinstance(note, Note) and note.title == "No recording yet" and note.instead == "the model, drawn above"
    assert "<strong>Instead:</strong> the model, drawn above" in note._repr_html_()
    assert draw(None, "a reason").title == "Nothing to draw"
    with pytest.raises(TypeError, match="instead"):
        draw(None, instead=3)
    fig = book.background.plot_wave_model(8, instead="never used: there is a figure")
    assert isinstance(fig, BookFigure)


# --------------------------------------------------------------------------------------------
# Notes


def test_note_is_an_admonition_with_code_spans_and_text():
    n = pk.note("run `python -m perfkit record x` on a GPU", title="No recording yet", instead="the model")
    html = n._repr_html_()
    assert html.startswith('<div class="admonition note perfkit-note">')
    assert '<p class="admonition-title">No recording yet</p>' in html
    assert "<code>python -m perfkit record x</code>" in html
    assert str(n).startswith("No recording yet: run `python") and "Instead: the model" in str(n)
    assert "<script>" not in pk.note("<script>alert(1)</script>")._repr_html_()


def test_note_bad_input():
    with pytest.raises(ValueError, match="text"):
        pk.note("  ")
    with pytest.raises(ValueError, match="kind"):
        pk.note("x", kind="danger!")
    with pytest.raises(TypeError, match="title"):
        pk.note("x", title=None)


# --------------------------------------------------------------------------------------------
# Tables


def test_table_has_no_index_and_formats_numbers():
    frame = pd.DataFrame({"layer": ["fc1", "fc2"], "time (µs)": [12.3456, 7.0], "params": [4096, 16_777_216],
                          "share": [0.25, 0.75]}, index=[10, 11])
    t = pk.table(frame, formats={"share": "{:.0%}"}, precision=1, caption="Two layers")
    assert isinstance(t, Table) and t.frame is frame
    assert t.rows() == [["fc1", "12.3", "4,096", "25%"], ["fc2", "7.0", "16,777,216", "75%"]]
    html = t._repr_html_()
    assert "<caption>Two layers</caption>" in html and "<th>time (µs)</th>" in html
    assert ">10<" not in html and ">11<" not in html  # no index
    assert html.count('class="num"') == 6 and html.count('class="text short"') == 2
    long = pk.table(pd.DataFrame({"claim": ["a claim far longer than fourteen characters"]}))._repr_html_()
    assert '<td class="text">' in long  # long text may wrap; short words never do
    assert str(t).splitlines()[0] == "Two layers" and "16,777,216" in str(t)
    assert pk.table(pd.DataFrame({"x": [float("nan")]})).rows() == [["–"]]


def test_table_shows_seconds_in_the_unit_asked_for():
    frame = pd.DataFrame({"layer": ["a"], "time_s": [2.5e-5], "predicted_s": [3e-3]})
    t = pk.table(frame, seconds={"time_s": "µs", "predicted_s": "ms"}, formats={"time (µs)": "{:.0f}"})
    assert list(t.shown.columns) == ["layer", "time (µs)", "predicted (ms)"]
    assert t.rows() == [["a", "25", "3.00"]] and list(frame.columns) == ["layer", "time_s", "predicted_s"]
    with pytest.raises(ValueError, match="unit"):
        pk.table(frame, seconds={"time_s": "minutes"})
    with pytest.raises(ValueError, match="seconds names"):
        pk.table(frame, seconds={"t": "µs"})


def test_table_of_no_data_is_a_note():
    frame, source = None, missing("no GPU here and no recording of 'gemm_waves' yet")
    note = pk.table(frame, source, instead="the model's table above")
    assert isinstance(note, Note) and note.title == "No recording yet"
    assert note.text.startswith("No GPU here") and note.instead == "the model's table above"
    assert pk.table(pd.DataFrame({"a": []}), "filtered to nothing").title == "Nothing to show"


def test_table_bad_input():
    with pytest.raises(TypeError, match="frame"):
        pk.table([[1, 2]])
    with pytest.raises(ValueError, match="formats names columns"):
        pk.table(pd.DataFrame({"a": [1]}), formats={"b": "{:.1f}"})
    with pytest.raises(ValueError, match="format string"):
        pk.table(pd.DataFrame({"a": [1]}), formats={"a": ".1f"})
    with pytest.raises(ValueError, match="precision"):
        pk.table(pd.DataFrame({"a": [1]}), precision=-1)


# --------------------------------------------------------------------------------------------
# The device card and rates


def test_device_card_is_one_line_with_the_rest_folded():
    card = pk.device_card(H100)
    assert "\n" not in card.line() and card.line().startswith("Running on H100-SXM (a GPU, 132 SMs)")
    html = card._repr_html_()
    assert "<details>" in html and "989.4 TFLOP/s" in html and "3,350.0 GB/s" in html
    cpu = pk.DeviceSpec(name="CPU (x86_64, 2 cores)", kind="cpu", sms=2, mem_bandwidth=9e9, l2_bytes=None,
                        memory_bytes=None, peaks={"float32": 5e10, "float16": 1.2e9}, sources={"peaks": "measured"})
    line = pk.device_card(cpu).line()
    assert line.startswith("Running on CPU (x86_64, 2 cores) with no GPU") and "recordings" in line
    assert "cores), 2 cores" not in line
    # a CPU's speed is the build machine's, never shown on a page; the GPU's peaks are
    assert "GFLOP/s" not in pk.device_card(cpu)._repr_html_() and "GB/s" not in pk.device_card(cpu)._repr_html_()
    assert "0.0 TFLOP/s" not in cpu.describe()
    with pytest.raises(TypeError, match="DeviceSpec"):
        pk.device_card("H100-SXM")


@pytest.mark.parametrize("value, unit, text", [(989.4e12, "FLOP", "989.4 TFLOP/s"), (1.2e9, "FLOP", "1.2 GFLOP/s"),
                                               (3.35e12, "B", "3.4 TB/s"), (5e5, "OP", "500,000.0 OP/s"),
                                               (float("inf"), "FLOP", "inf FLOP/s")])
def test_format_rate_never_prints_zero_of_a_large_unit(value, unit, text):
    assert format_rate(value, unit) == text
