import ast
import base64
import html
import importlib
import json
import re

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402

from perfkit.book.background.figures import plot_roofline, plot_tile_waves  # noqa: E402
from perfkit.book.figures import MIN_FONT_PT, caption_text, new_figure, shown_px  # noqa: E402
from perfkit.book.interactive import (FOOTNOTE, MIN_FONT_PX, SOURCE_CHARS, State, figure_json, footnote,  # noqa: E402
                                      footnote_of, footnote_px, heading, retitle, with_menu, with_slider)
from perfkit.provenance import Source, caption, modelled  # noqa: E402
from perfkit.roofline import Operation, gemm_operation, nvidia_example_operations  # noqa: E402
from perfkit.book.widgets import gemm_explorer, roofline_explorer  # noqa: E402
from figure_helpers import by_trace, plotly_font_sizes, small_texts  # noqa: E402
from testkit import A100, H100, REPO, V100, heading_text  # noqa: E402

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
    title = " ".join(heading_text(plot_roofline([], [H100, A100]).axes[0]).split())  # the caption's lines joined
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


# ------------------------------------------------------------------------------ legible in a room
#: What a figure's sources look like (perfkit.provenance.Source.label, the datasheets a model rests on).
SOURCE_WORDS = re.compile(r"datasheet|recorded on|live (\(quick sweep\) )?on|published by|measured on|model of",
                          re.IGNORECASE)


def _titles(fig) -> list[str]:
    return [t for t in [fig._suptitle.get_text() if fig._suptitle else "", *(ax.get_title() for ax in fig.axes)]
            if t]


def _static_figures():
    ops = nvidia_example_operations()
    yield plot_roofline(ops, [H100, A100], "float16", source="recorded on NVIDIA H100 80GB HBM3 on 2026-11-20")
    yield plot_roofline([gemm_operation(8192, 128, 8192, "float16"), Operation("a copy", 0, 1e6)], H100,
                        ceilings={"label": "measured cuBLAS", "flop_s": 700e12, "bandwidth": 3.0e12})
    yield plot_roofline(ops, [H100, A100, V100], "float16")  # three roofs: the ridges named in the legend
    yield plot_tile_waves(2304, 1537, (256, 128), 108, source=modelled(A100))
    # what the explorers draw, into the Axes they make
    yield plot_roofline([gemm_operation(2304, 1536, 4096, "float16")], [A100, H100], "float16",
                        ax=new_figure(height=4.8)[1][0, 0])
    yield plot_tile_waves(2304, 1536, (128, 128), 108, ax=new_figure(height=5.5, width=6.5)[1][0, 0],
                          source=modelled(A100))


@pytest.mark.parametrize("index", range(6))
def test_every_text_of_these_figures_is_legible_and_no_title_names_its_source(index):
    fig = list(_static_figures())[index]
    small = small_texts(fig, MIN_FONT_PT)
    assert not small, f"text under {MIN_FONT_PT} pt: {small[:5]}"
    for title in _titles(fig):
        assert not SOURCE_WORDS.search(title), f"a source in the title {title!r}: it goes in the caption"
    assert SOURCE_WORDS.search(caption_text(fig.captions))
    assert shown_px(MIN_FONT_PT, int.from_bytes(fig.to_png()[16:20], "big")) >= MIN_FONT_PX


def _landing_roofline():
    """The figure the landing page draws: its code cell (intro.md), run as the page runs it."""
    cell = next(c for c in re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", (REPO / "intro.md").read_text(), re.S)
                if "plot_roofline" in c)
    tree = ast.parse(re.sub(r"^---\n.*?\n---\n", "", cell, flags=re.S))
    scope: dict = {}
    exec(compile(ast.Module(tree.body[:-1], []), "intro.md", "exec"), scope)
    return eval(compile(ast.Expression(tree.body[-1].value), "intro.md", "eval"), scope)


def test_the_landing_pages_roofline_says_what_it_shows_and_its_sources_below():
    fig = _landing_roofline()
    (title,) = _titles(fig)
    assert "Roofline" in title and "V100-SXM2" in title and "H100-SXM" in title and "float16" in title, title
    assert not SOURCE_WORDS.search(title) and "datasheet" not in title.lower(), title
    caption = " ".join(caption_text(fig.captions).split())
    assert "V100 datasheet" in caption and "H100 datasheet" in caption
    assert not small_texts(fig, MIN_FONT_PT)


def _interactive_figures():
    from perfkit.book import CHAPTERS

    for folder in CHAPTERS:
        module = importlib.import_module(f"perfkit.book.{folder}.interactive")
        for name, build in module.FIGURES.items():
            yield f"{folder}:{name}", build


INTERACTIVE = list(_interactive_figures())


@pytest.mark.parametrize("name, build", INTERACTIVE, ids=[n for n, _ in INTERACTIVE])
def test_every_font_of_an_interactive_figure_is_legible_and_its_sources_are_a_footnote(name, build):
    figure = build()
    spec = figure_json(figure)
    layout = spec["layout"]
    fonts = plotly_font_sizes(spec)
    assert layout["font"]["size"] >= MIN_FONT_PX  # Plotly's default for every text no font names
    small = [(where, size) for where, size in fonts if size < MIN_FONT_PX]
    assert not small, f"{name}: fonts under {MIN_FONT_PX} px: {small[:5]}"
    text = json.dumps(spec)
    assert "<sup>" not in text and "<sub>" not in text and "<small>" not in text  # 70 % of the font
    logs = [axis for key, axis in layout.items() if key[1:5] == "axis" and axis.get("type") == "log"]
    assert all(axis.get("minorloglabels") == "none" for axis in logs), name  # Plotly's 2s and 5s: 0.75×
    # the title says what the figure shows; its sources are the footnote under it, in every state
    index = [i for i, a in enumerate(layout["annotations"]) if a.get("name") == FOOTNOTE]
    assert len(index) == 1 and layout["annotations"][index[0]]["font"]["size"] >= MIN_FONT_PX, name
    for state in [{}, *(by_trace(args)[1] for args in _control_args(layout))]:
        title = state.get("title.text", layout["title"]["text"])
        assert not SOURCE_WORDS.search(title), f"{name}: a source in the title {title!r}"
        note = state.get(f"annotations[{index[0]}].text", layout["annotations"][index[0]]["text"])
        if "annotations" in state:
            note = state["annotations"][index[0]]["text"]
        assert SOURCE_WORDS.search(note), f"{name}: no source under the figure"
        assert all(len(html.unescape(line)) <= SOURCE_CHARS for line in note.split("<br>")), note


def _control_args(layout: dict) -> list:
    return ([s["args"] for slider in layout.get("sliders", []) for s in slider["steps"]]
            + [b["args"] for menu in layout.get("updatemenus", []) for b in menu["buttons"]])


def _two_states(footnotes=(None, None), annotations=None):
    return [State(str(i), [{"y": [i, i + 1]}], {**({"footnote": f} if f else {}),
                                                **({"annotations": annotations(i)} if annotations else {})})
            for i, f in enumerate(footnotes)]


def test_the_footnote_takes_its_room_from_the_plot_not_the_page():
    trace = go.Scatter(x=[1, 2], y=[1, 2])
    layout = {**heading("Time against size", "recorded on NVIDIA H100 80GB HBM3 on 2026-11-20"), "height": 500,
              "margin": {"t": 50, "b": 90}}
    fig = with_slider([trace], _two_states(), prefix="k = ", layout=layout)
    assert fig.layout.height == 500 and fig.layout.margin.t == 50
    assert fig.layout.margin.b == 90 + footnote_px(layout["footnote"])
    (note,) = fig.layout.annotations
    assert note.name == FOOTNOTE and note.text == "recorded on NVIDIA H100 80GB HBM3 on 2026-11-20"
    assert note.yanchor == "bottom" and note.y < 0 and note.font.size >= MIN_FONT_PX
    assert fig.layout.title.text == "Time against size" and "recorded" not in fig.layout.title.text
    with pytest.raises(TypeError, match="source must be"):
        heading("Time against size", 3)


def test_a_state_that_changes_its_source_changes_the_footnote():
    trace = go.Scatter(x=[1, 2], y=[1, 2])
    states = [State(s, [{"y": [1, 2]} if s == "a" else {"y": [2, 1]}], retitle(f"Roofline of {s}", f"model of {s}"))
              for s in ("a", "b")]
    fig = with_menu([trace], states, active=1, layout={"annotations": [{"text": "a note", "showarrow": False}]})
    assert fig.layout.title.text == "Roofline of b" and footnote_of(fig) == "model of b"
    for button, s in zip(fig.layout.updatemenus[0].buttons, ("a", "b")):
        assert button.args[1] == {"title.text": f"Roofline of {s}", "annotations[1].text": f"model of {s}"}
    # a state that sets every annotation keeps the footnote, after its own
    replaced = _two_states(annotations=lambda i: [{"text": f"note {i}", "showarrow": False}])
    fig = with_slider([trace], replaced, prefix="", layout=heading("T", "live on CPU, 2026-11-22"))
    for step in fig.layout.sliders[0].steps:
        texts = [a["text"] for a in step.args[1]["annotations"]]
        assert texts[-1] == "live on CPU, 2026-11-22" and step.args[1]["annotations"][-1]["name"] == FOOTNOTE


def test_a_long_source_is_wrapped_between_its_sources_first():
    text = footnote("model: model of H100-SXM: NVIDIA H100 datasheet (SXM), dense; points: recorded on NVIDIA H100 "
                    "80GB HBM3 on 2026-01-02")
    assert text.split("<br>") == ["model: model of H100-SXM: NVIDIA H100 datasheet (SXM), dense;",
                                  "points: recorded on NVIDIA H100 80GB HBM3 on 2026-01-02"]
    assert footnote(["a & b", "c", "a & b"]) == "a &amp; b<br>c"
    assert all(len(line) <= SOURCE_CHARS for line in footnote("word " * 60).split("<br>"))


@pytest.mark.slow
def test_in_a_browser_no_margin_grows_so_each_footnote_sits_under_everything(tmp_path):
    """Plotly widens a margin too small for its slider, menu or legend, which would move a footnote
    placed in paper coordinates onto them: in Chromium, 760 px wide (the column at a 1280 px window),
    every figure keeps the margins it asks for and its footnote lies inside it, below every other text."""
    from pathlib import Path

    import plotly
    from playwright.sync_api import sync_playwright

    from perfkit.book.interactive import CONFIG

    script = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    pages = []
    for name, build in INTERACTIVE:
        fig = build().figure
        body = fig.to_html(full_html=False, include_plotlyjs=False, div_id="f", config=CONFIG,
                           default_width="100%", default_height=f"{fig.layout.height}px")
        page = tmp_path / f"{name.replace(':', '-')}.html"
        page.write_text(f'<html><head><script src="file://{script}"></script></head><body style="margin:0">'
                        f'<div style="width:760px">{body}</div></body></html>')
        pages.append((name, page))
    measure = """() => { const gd = document.getElementById('f'), s = gd._fullLayout._size, m = gd.layout.margin;
        const box = e => { const r = e.getBoundingClientRect(); return [r.top, r.bottom, r.left, r.right]; };
        const notes = Array.from(gd.querySelectorAll('.annotation')).map(box);
        const others = Array.from(gd.querySelectorAll('.slider-container, .legend, .updatemenu-header-group'))
            .map(box).concat(notes.slice(0, -1));
        return {asked: [m.t, m.b], got: [s.t, s.b], height: gd._fullLayout.height, note: notes[notes.length - 1],
                others: others}; }"""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium")
        tab = browser.new_page(viewport={"width": 1280, "height": 900})
        for name, page in pages:
            tab.goto(f"file://{page}")
            tab.wait_for_function("() => document.getElementById('f')._fullLayout !== undefined")
            got = tab.evaluate(measure)
            assert [round(v) for v in got["got"]] == got["asked"], f"{name}: Plotly widened a margin: {got}"
            top, bottom = got["note"][:2]
            assert 0 <= top and bottom <= got["height"] + 1, f"{name}: the footnote leaves the figure: {got}"
            assert all(other[1] <= top + 1 for other in got["others"] if other[1] > other[0]), (
                f"{name}: something sits on the footnote: {got}")
        browser.close()
