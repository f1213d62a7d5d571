"""Figures of experiment results: each is captioned by its frames' source, and none is drawn without data."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.ticker import EngFormatter  # noqa: E402

from perfkit import book  # noqa: E402
from perfkit.devices import device_spec  # noqa: E402
from perfkit.book.gemm import experiments as gemm  # noqa: E402
from perfkit.provenance import Source, missing, modelled, source_of  # noqa: E402
from perfkit.quantization import cdiv  # noqa: E402
from perfkit.book.figures import (CAPTION_CHARS, COLUMN_PX, MAX_PNG_PX, MIN_FONT_PT, MIN_FONT_PX,  # noqa: E402
                                  caption_figure, caption_text, category_ticks, new_figure, shown_px)
from figure_helpers import figure_named, note_of, small_texts
from testkit import CPU_LIVE, H100_RECORDED, RECORDED_LABEL, framed, heading_text


def _heading(fig) -> str:
    """Every title of ``fig`` (suptitle and Axes titles), with line wrapping undone."""
    titles = [heading_text(fig)]
    return " ".join(" ".join(titles).split())


def _quant_frame():
    rows = []
    for n in range(64, 1025, 64):
        waves = cdiv(n, 128)
        for impl in ("triton 256x128", "cublas"):
            rows.append({"impl": impl, "M": 33792, "N": n, "K": 2048, "dtype": "float16", "tiles": 132 * waves,
                         "waves": waves, "time_s": 1e-5 * waves, "tflops": 100.0, "predicted_s": 1.1e-5 * waves})
    return pd.DataFrame(rows)


def _sizes_frame():
    sweeps = {"mn": [(s, 4096) for s in (256, 512, 1024)], "k": [(4096, s) for s in (128, 256)]}
    return pd.DataFrame([{"sweep": sweep, "M": m, "N": m, "K": k, "dtype": "float16", "time_s": 1e-5 * m * k / 2**20,
                          "tflops": 50.0, "predicted_s": 1.2e-5 * m * k / 2**20}
                         for sweep, pairs in sweeps.items() for m, k in pairs])


FRAMES = {
    "plot_alignment": lambda: pd.DataFrame({"dtype": ["float16"] * 9, "K": range(4092, 4101), "M": 4096, "N": 4096,
                                            "alignment": 8, "aligned": [k % 8 == 0 for k in range(4092, 4101)],
                                            "time_s": [2e-4 if k % 8 else 1e-4 for k in range(4092, 4101)]}),
    "plot_gemm_sizes": _sizes_frame,
    "plot_quantization_sweep": _quant_frame,
    "plot_tile_sizes": lambda: pd.DataFrame({"impl": ["cublas", "triton 256x128"], "M": 6144, "N": 2816, "K": 4096,
                                             "dtype": "float16", "tflops": [700.0, 500.0], "waves": [np.nan, 4]}),
    "plot_transposes": lambda: pd.DataFrame({"layout": ["NN", "NT", "TN", "TT"], "M": 4096, "N": 4096, "K": 4096,
                                             "dtype": "float16", "tflops": [700.0, 690.0, 650.0, 640.0],
                                             "shape": "square"}),
    "plot_small_n": lambda: pd.DataFrame({"N": [1, 2, 4, 8], "M": 2560, "K": 2560, "dtype": "float16",
                                          "time_s": [4e-6] * 4, "predicted_s": [5e-6] * 4,
                                          "tflops": [3.0, 6.0, 12.0, 24.0], "gbps": [3000.0] * 4}),
    "plot_timers": lambda: pd.DataFrame({"case": ["a", "b"], "perfkit_time_s": [1e-5, 1e-3],
                                         "perfkit_graph_time_s": [8e-6, 1e-3], "triton_do_bench_s": [1.1e-5, 1e-3],
                                         "torch_timer_s": [7e-6, 1e-3]}),
    "plot_waves": lambda: pd.DataFrame({"blocks": [1, 131, 132, 133, 264, 265], "wave_size": 132, "sms": 132,
                                        "blocks_per_sm": 1, "waves": [1, 1, 1, 2, 2, 3],
                                        "time_s": [1e-5, 1e-5, 1e-5, 2e-5, 2e-5, 3e-5]}),
}
ONE_PANEL = ["plot_alignment", "plot_tile_sizes", "plot_timers", "plot_transposes", "plot_waves"]
TIMED = ["plot_gemm_sizes", "plot_quantization_sweep", "plot_small_n", "plot_timers", "plot_waves"]


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_frame_metadata_is_the_caption(name):
    fig = figure_named(name)(framed(FRAMES[name](), H100_RECORDED))
    assert isinstance(fig, matplotlib.figure.Figure)
    assert RECORDED_LABEL in _heading(fig)


@pytest.mark.parametrize("source", [RECORDED_LABEL, Source("recorded", "NVIDIA H100 80GB HBM3", "2026-11-20")])
@pytest.mark.parametrize("name", sorted(FRAMES))
def test_hand_built_frame_takes_source_as_str_or_source(name, source):
    assert RECORDED_LABEL in _heading(figure_named(name)(FRAMES[name](), source))


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_source_that_contradicts_the_frame_is_a_mislabel(name):
    frame = framed(FRAMES[name](), H100_RECORDED)
    with pytest.raises(ValueError, match="contradicts"):
        figure_named(name)(frame, "live on CPU (x86_64, 2 cores), 2026-11-22")
    assert RECORDED_LABEL in _heading(figure_named(name)(frame, RECORDED_LABEL))  # agreeing is no mislabel


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_figure_of_a_frame_without_any_source_is_refused(name):
    with pytest.raises(ValueError, match="source="):
        figure_named(name)(FRAMES[name]())
    with pytest.raises(TypeError, match="source must be"):
        figure_named(name)(FRAMES[name](), 3)


@pytest.mark.parametrize("name", ONE_PANEL)
def test_one_panel_figure_draws_into_the_given_axes(name):
    fig, (left, right) = plt.subplots(1, 2)
    assert figure_named(name)(FRAMES[name](), RECORDED_LABEL, ax=right) is fig
    assert len(fig.axes) == 2 and not left.has_data() and RECORDED_LABEL in " ".join(heading_text(right).split())


@pytest.mark.parametrize("name", TIMED)
def test_durations_are_plotted_in_seconds_with_si_prefixes(name):
    fig = figure_named(name)(FRAMES[name](), RECORDED_LABEL)
    fig.canvas.draw()
    timed = [axis for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             if isinstance(axis.get_major_formatter(), EngFormatter)]
    assert timed and all(axis.get_major_formatter().unit == "s" for axis in timed)
    ticks = [t.get_text() for axis in timed for t in axis.get_ticklabels()]
    assert any(t.endswith(("µs", "ms")) for t in ticks), ticks
    assert not any(u in axis.get_label_text() for axis in timed for u in ("(µs)", "(ms)", "(s)"))


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_no_figure_without_data(name, capsys):
    assert note_of(figure_named(name)(None, "no recording of 'x' yet")) == "Nothing to draw: No recording of 'x' yet"
    assert note_of(figure_named(name)(None)).startswith("Nothing to draw:")
    assert f"no rows ({RECORDED_LABEL})" in note_of(figure_named(name)(framed(FRAMES[name]().iloc[:0], H100_RECORDED)))
    text = note_of(figure_named(name)(None, missing("no GPU"), instead="the model, above"))
    assert text == "No recording yet: No GPU Instead: the model, above"
    assert capsys.readouterr().out == ""  # a figure function returns its note, never prints


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_gemm_sizes_figure_from_a_real_cpu_run(short_bench):
    # Real measurements with a tiny time budget (short_bench): this checks the figure, not the timings.
    frame = gemm.gemm_sizes(device="cpu", quick=True, progress=False)
    fig = book.gemm.plot_gemm_sizes(frame)
    assert str(source_of(frame)) in _heading(fig) and "live" in _heading(fig)
    assert len(fig.axes) == 4


def _predicted(scale: float, meta: dict | None) -> pd.DataFrame:
    frame = pd.DataFrame({"time_s": np.array([1.0, 2.0, 4.0]) * scale,
                          "predicted_s": np.array([1.1, 2.0, 3.0]) * scale})
    return framed(frame, meta) if meta else frame


def test_predicted_vs_measured_reports_the_error():
    fig = book.gemm.plot_predicted_vs_measured({"a": _predicted(1.0, H100_RECORDED), "b": None})
    title = _heading(fig)
    assert "median |error| 10%" in title and "(3 GEMMs)" in title


def test_predicted_vs_measured_caption_names_every_source():
    fig = book.gemm.plot_predicted_vs_measured({"sizes": _predicted(1e-3, H100_RECORDED), "waves": None,
                                            "small N": _predicted(1e-5, CPU_LIVE)})
    title = _heading(fig)
    assert f"sizes: {RECORDED_LABEL}" in title and "small N: live on AMD EPYC 7B13, 2026-11-22" in title
    assert "waves" not in title

    same = _heading(book.gemm.plot_predicted_vs_measured({"sizes": _predicted(1e-3, H100_RECORDED),
                                                      "waves": _predicted(1e-4, H100_RECORDED)}))
    assert same.count("recorded on") == 1 and "sizes:" not in same


def test_predicted_vs_measured_source_of_hand_built_frames():
    with pytest.raises(ValueError, match=r"sources\['a'\]"):
        book.gemm.plot_predicted_vs_measured({"a": _predicted(1.0, None)})
    fig = book.gemm.plot_predicted_vs_measured({"a": _predicted(1.0, None)}, sources={"a": RECORDED_LABEL})
    assert RECORDED_LABEL in _heading(fig)
    with pytest.raises(ValueError, match="contradicts"):
        book.gemm.plot_predicted_vs_measured({"a": _predicted(1.0, CPU_LIVE)}, sources={"a": RECORDED_LABEL})


def test_no_model_figure_names_the_parts_without_data(capsys):
    unpredicted = framed(pd.DataFrame({"time_s": [1.0]}), H100_RECORDED)
    out = note_of(book.gemm.plot_predicted_vs_measured({"sizes": None, "waves": unpredicted}))
    assert out.startswith("Nothing to draw:") and "no data for sizes" in out and "no predictions in waves" in out


def test_wave_model_figure():
    fig = book.background.plot_wave_model(8, max_waves=2)
    assert "8 SMs" in _heading(fig) and "model of" in _heading(fig)
    h100 = device_spec("H100-SXM")
    assert str(modelled(h100)) in _heading(book.background.plot_wave_model(h100.sms, source=modelled(h100)))
    with pytest.raises(ValueError, match="sms"):
        book.background.plot_wave_model(0)


def test_samples_histogram_counts_every_sample_and_names_its_source():
    from perfkit.measurement import Measurement

    m = Measurement(samples=[1e-3, 1.1e-3, 1.2e-3, 5e-3], label="gemm", device="CPU (x86_64, 2 cores)")
    fig = book.timing.plot_samples(m)
    ax = fig.axes[0]
    assert sum(p.get_height() for p in ax.patches) == m.n
    assert "gemm: spread of the samples" in heading_text(ax) and "live on CPU (x86_64, 2 cores)" in heading_text(ax)
    assert isinstance(ax.xaxis.get_major_formatter(), EngFormatter)
    assert "recorded on X" in heading_text(book.timing.plot_samples(m, source="recorded on X").axes[0])
    with pytest.raises(TypeError, match="Measurement"):
        book.timing.plot_samples([1e-3])
    plt.close("all")


# ------------------------------------------------------------------------------ legible in a room
#: What a figure's sources look like (perfkit.provenance.Source.label and the datasheets a model rests
#: on): none of it belongs in a title, all of it in the caption under the figure.
SOURCE_WORDS = re.compile(r"datasheet|recorded on|live (\(quick sweep\) )?on|published by|measured on|model of",
                          re.IGNORECASE)


def _titles(fig) -> list[str]:
    """The suptitle and every Axes title of ``fig`` (not the caption under it)."""
    return [t for t in [fig._suptitle.get_text() if fig._suptitle else "", *(ax.get_title() for ax in fig.axes)]
            if t]


def _png_width(png: bytes) -> int:
    return int.from_bytes(png[16:20], "big")  # the IHDR chunk: width, then height


def _legible(fig) -> None:
    """Every text ``fig`` draws is at least MIN_FONT_PT, shows at least MIN_FONT_PX wide in the column,
    and no title names a source while the caption does."""
    small = small_texts(fig, MIN_FONT_PT)
    assert not small, f"{_titles(fig)}: text under {MIN_FONT_PT} pt: {small[:5]}"
    for title in _titles(fig):
        assert not SOURCE_WORDS.search(title), f"a source in the title {title!r}: it goes in the caption"
    assert SOURCE_WORDS.search(caption_text(fig.captions)), fig.captions
    width = _png_width(fig.to_png())
    assert shown_px(MIN_FONT_PT, width) >= MIN_FONT_PX, f"a {width} px PNG shrinks its {MIN_FONT_PT} pt type"


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_every_text_of_a_figure_is_legible_and_no_title_names_its_source(name):
    _legible(figure_named(name)(framed(FRAMES[name](), H100_RECORDED)))


def test_the_other_figures_here_are_legible_too():
    from perfkit.measurement import Measurement

    m = Measurement(samples=[1e-3, 1.1e-3, 1.2e-3, 5e-3], label="gemm", device="CPU (x86_64, 2 cores)")
    for fig in (book.gemm.plot_predicted_vs_measured({"sizes": _predicted(1e-3, H100_RECORDED),
                                                      "small N": _predicted(1e-5, CPU_LIVE)}),
                book.background.plot_wave_model(132, source=modelled(device_spec("H100-SXM"))),
                book.timing.plot_samples(m)):
        _legible(fig)


def test_the_least_type_shows_at_the_least_size_in_the_column():
    assert shown_px(MIN_FONT_PT, MAX_PNG_PX) >= MIN_FONT_PX > shown_px(MIN_FONT_PT, MAX_PNG_PX + 20)
    assert shown_px(MIN_FONT_PT - 1, COLUMN_PX) < MIN_FONT_PX  # the constant is the least that works
    assert _png_width(book.gemm.plot_alignment(FRAMES["plot_alignment"](), RECORDED_LABEL).to_png()) <= MAX_PNG_PX


def test_a_long_caption_is_wrapped_to_the_figure_in_legible_type():
    sources = [("a", "model of V100-SXM2: NVIDIA GPU Performance Background guide; V100 datasheet"),
               ("b", "published by Baidu DeepBench, measured on Tesla V100-SXM2 (cuBLAS 10.1, cuDNN 7.6, 2019)"),
               ("c", RECORDED_LABEL + "; timed: CUDA events around 100 launches, median of 5 repeats")]
    text = caption_text(sources)
    assert text.count("\n") >= 2 and all(len(line) <= CAPTION_CHARS for line in text.split("\n"))
    strip = caption_figure(text, width_px=760)
    strip.canvas.draw()
    (drawn,) = strip.texts
    assert drawn.get_fontsize() >= MIN_FONT_PT
    assert drawn.get_window_extent().x1 <= 760, "the caption runs off the figure"


def test_category_ticks_label_every_kth_where_all_would_overlap():
    ax = new_figure(height=3)[1][0, 0]
    labels = [f"shape {i}" for i in range(120)]
    category_ticks(ax, labels)
    shown = [t.get_text() for t in ax.get_xticklabels()]
    assert len(shown) == 120 and shown[0] == "shape 0" and 1 < shown.count("") < 120
    step = next(i for i in range(1, len(shown)) if shown[i])  # the next label shown
    kept = [t for t in shown if t]
    assert kept == labels[::step] and all(t.get_fontsize() >= MIN_FONT_PT for t in ax.get_xticklabels())
    category_ticks(ax, labels[:5], axis="y")
    assert [t.get_text() for t in ax.get_yticklabels()] == labels[:5]  # five fit: every one
    with pytest.raises(ValueError, match="axis"):
        category_ticks(ax, labels, axis="z")
