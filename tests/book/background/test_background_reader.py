"""Chapter 01_background for its reader: the interactive rooflines, the problems, and a roofline
whose every label can be read."""

from __future__ import annotations

import html
import itertools
import textwrap

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Text  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import perfkit as pk  # noqa: E402
from perfkit.book import problems as exercises  # noqa: E402
from perfkit.book.background import interactive as background  # noqa: E402
from perfkit.book.interactive import MAX_HTML_BYTES, SOURCE_CHARS, html_bytes  # noqa: E402
from perfkit.provenance import modelled  # noqa: E402
from perfkit.units import TERA, format_time  # noqa: E402
from figure_helpers import state_heading, steps as _steps  # noqa: E402
from testkit import CHAPTERS, A100, H100, V100, heading_text

OPS = pk.roofline.nvidia_example_operations("float16")


# --------------------------------------------------------------------------------------------
# The roofline with a device menu


def test_roofline_by_device_places_every_operation_on_every_roof():
    fig = background.roofline_by_device()
    steps = _steps(fig)
    known = [pk.device_spec(g) for g in background.BOOK_GPUS]
    assert all("float16" in s.peaks for s in known)
    assert [label for label, _ in steps] == [background.menu_label(s) for s in known]
    assert fig.figure.layout.updatemenus[0].active == [s.name for s in known].index("H100-SXM")
    assert list(fig.figure.data[2].x) == pytest.approx([op.intensity for op in OPS], rel=1e-4)
    for (label, (data, layout)), spec in zip(steps, known):
        ys = data["y"][2]
        assert ys == pytest.approx([pk.roofline.attainable_flop_s(op.intensity, spec, "float16") / TERA for op in OPS],
                                   rel=1e-4)
        bounds = [pk.roofline_time(op.flops, op.bytes, spec, "float16")[1] for op in OPS]
        assert data["text"][2] == [f"{op.name}: {b}" for op, b in zip(OPS, bounds)]
        assert data["marker.color"][2] == [background.BOUND_COLOURS[b] for b in bounds]
        assert data["x"][1] == pytest.approx([spec.ops_per_byte("float16")], rel=1e-4)
        assert max(data["y"][0]) == pytest.approx(spec.peak_flop_s("float16") / TERA, rel=1e-4)
        for line in textwrap.wrap(str(modelled(spec)), SOURCE_CHARS):  # a long source, wrapped
            assert html.escape(line) in state_heading(fig, layout)
        assert f"{bounds.count('math')} of 5 math-bound on {spec.name}" in layout["annotations[0].text"]
    # The batch-512 layer clears the V100's, H100's and the newest GPUs' ridges but not the L40S's.
    by = {label.split(" (")[0]: data for label, data in steps}
    for gpu in ("V100-SXM2", "H100-SXM", "B200", "MI300X"):
        assert by[gpu][0]["text"][2][0].endswith(": math"), gpu
    assert by["L40S"][0]["text"][2][0].endswith(": memory")
    assert "model of H100-SXM" in heading_text(fig)
    assert html_bytes(fig) < MAX_HTML_BYTES


def test_roofline_by_device_axes_show_every_point_and_label_positions_alternate():
    fig = background.roofline_by_device()
    lo, hi = fig.figure.layout.yaxis.range
    for _, (data, _) in _steps(fig):
        for y in data["y"][2] + data["y"][1]:
            assert 10 ** lo < y < 10 ** hi
    where = dict(zip((op.name for op in OPS), fig.figure.data[2].textposition))
    # Layer norm and max pool sit 0.05 decades apart: their names go on opposite sides.
    assert where["Layer norm"] != where["Max pool 3×3, stride 1"]
    # The batch-512 name would run past the right edge: it goes above, to the left.
    assert where["Linear 4096×1024, batch 512"] == "top left"


def test_roofline_by_device_with_chosen_devices_and_bad_input():
    fig = background.roofline_by_device(OPS[:2], devices=["V100-SXM2", A100], active="A100-SXM4-80GB")
    assert [label for label, _ in _steps(fig)] == ["V100-SXM2 (Volta)", "A100-SXM4-80GB (Ampere)"]
    only_fp8 = background.roofline_by_device(dtype="float8")  # the default menu, less those without FP8
    fp8_names = [label.split(" (")[0] for label, _ in _steps(only_fp8)]
    assert fp8_names == [g for g in background.BOOK_GPUS if "float8" in pk.device_spec(g).peaks]
    every = background.roofline_by_device(devices=None)  # every known GPU with an FP16 peak
    assert [label.split(" (")[0] for label, _ in _steps(every)] == [
        s.name for s in pk.KNOWN_DEVICES.values() if "float16" in s.peaks]
    with pytest.raises(LookupError):
        background.roofline_by_device(devices=["no-such-gpu"])
    with pytest.raises(LookupError, match="float8"):
        background.roofline_by_device(devices=["V100-SXM2", "H100-SXM"], dtype="float8")
    with pytest.raises(ValueError, match="active"):
        background.roofline_by_device(active="T4")  # known, but not in the default menu
    with pytest.raises(TypeError, match="operations"):
        background.roofline_by_device([1, 2])
    with pytest.raises(ValueError, match="FLOPs"):
        background.roofline_by_device([pk.roofline.Operation("copy", 0, 1e6)])
    with pytest.raises(TypeError, match="devices"):
        background.roofline_by_device(devices="H100-SXM")
    with pytest.raises(ValueError, match="at least one"):
        background.roofline_by_device(devices=[])


# --------------------------------------------------------------------------------------------
# The batch slider


def test_gemm_batch_roofline_moves_the_gemm_along_each_roof():
    fig = background.gemm_batch_roofline(1024, 4096)
    steps = _steps(fig)
    batches = [int(label) for label, _ in steps]
    assert batches[0] == 1 and batches[-1] == 8192 and batches == sorted(batches)
    crossing = {s.name: pk.math_bound_batch(1024, 4096, s) for s in (V100, H100)}
    assert set(crossing.values()) <= set(batches)
    for n, (data, layout) in zip(batches, [args for _, args in steps]):
        op = pk.roofline.gemm_operation(4096, n, 1024, "float16")
        for i, spec in enumerate((V100, H100)):
            t, bound = pk.roofline_time(op.flops, op.bytes, spec, "float16")
            point = 4 + i  # two traces per roof (line, ridge), then one point per device
            assert data["x"][point] == pytest.approx([pk.arithmetic_intensity(4096, n, 1024, "float16")], rel=1e-4)
            assert data["y"][point] == pytest.approx([pk.roofline.attainable_flop_s(op.intensity, spec, "float16") / TERA],
                                                     rel=1e-4)
            assert data["text"][point] == [f"{spec.name}: {bound}, {format_time(t)}"]
            assert (bound == "math") == (n >= crossing[spec.name])
        assert f"batch {n}: GEMM 4096×{n}×1024" in layout["annotations[0].text"]
    assert "model of V100-SXM2" in heading_text(fig) and "model of H100-SXM" in heading_text(fig)
    assert html_bytes(fig) < MAX_HTML_BYTES


def test_gemm_batch_roofline_bad_input():
    fig = background.gemm_batch_roofline(4096, 4096, devices=["H100-SXM"], batches=[1, 64, 4096], active=2)
    assert [label for label, _ in _steps(fig)] == ["1", "64", "4096"]
    assert fig.figure.layout.sliders[0].active == 2
    with pytest.raises(ValueError, match="batches"):
        background.gemm_batch_roofline(batches=[0, 8])
    with pytest.raises(ValueError, match="batches"):
        background.gemm_batch_roofline(batches=[8])
    with pytest.raises(ValueError, match="active"):
        background.gemm_batch_roofline(batches=[1, 2], active=2)
    with pytest.raises(ValueError, match="K"):
        background.gemm_batch_roofline(0, 4096)
    with pytest.raises(TypeError, match="devices"):
        background.gemm_batch_roofline(devices=[3])


# --------------------------------------------------------------------------------------------
# The static roofline: every label legible, no point hidden


def _boxes(fig, texts):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [Text.get_window_extent(t, renderer) for t in texts]  # the text, not its leader line


@pytest.mark.parametrize("specs", [[pk.current_device(), H100], [H100, A100], [V100, H100]],
                         ids=["this-device+H100", "H100+A100", "V100+H100"])
def test_plot_roofline_labels_do_not_overlap_and_points_are_inside(specs):
    fig = pk.book.background.plot_roofline(OPS, specs, "float16")
    (ax,) = fig.axes
    names = [t for t in ax.texts if t.get_text() in {op.name for op in OPS}]
    assert len(names) == len(OPS)
    boxes = _boxes(fig, names)
    for (a, ta), (b, tb) in itertools.combinations(zip(boxes, names), 2):
        assert not a.overlaps(b), (ta.get_text(), tb.get_text())
    figure_box = fig.bbox
    for box, t in zip(boxes, names):
        assert figure_box.x0 <= box.x0 and box.x1 <= figure_box.x1, t.get_text()
        assert figure_box.y0 <= box.y0 and box.y1 <= figure_box.y1, t.get_text()
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    for line in ax.get_lines():
        if line.get_marker() in ("s", "o"):
            x, y = line.get_xdata()[0], line.get_ydata()[0]
            assert x0 < x < x1 and y0 < y < y1
    plt.close(fig)


def test_plot_roofline_names_an_operation_it_cannot_draw():
    fig = pk.book.background.plot_roofline(OPS + [pk.roofline.Operation("copy", 0, 1e6)], H100)
    (ax,) = fig.axes
    notes = [t.get_text() for t in ax.texts if "not drawn" in t.get_text()]
    assert notes and "copy" in notes[0]
    assert len([line for line in ax.get_lines() if line.get_marker() == "s"]) == len(OPS)
    plt.close(fig)


# --------------------------------------------------------------------------------------------
# Problems


def test_background_exercises_answers_and_slips():
    ids = [ex.id for ex in exercises.all_exercises("01_background")]
    assert ids == ["background-1", "background-2", "background-3", "background-4"]
    assert exercises.answer("background-1") == pytest.approx(pk.arithmetic_intensity(4096, 64, 1024, "float16"))
    assert exercises.answer("background-2") == pk.math_bound_batch(1024, 4096, H100)
    relu = next(op for op in OPS if op.name == "ReLU")
    assert exercises.answer("background-3") == pytest.approx(pk.roofline_time(relu.flops, relu.bytes, H100,
                                                                              "float16")[0] * 1e6)
    assert exercises.answer("background-4") == pytest.approx(100 * 140 / 264)


@pytest.mark.parametrize("exercise_id,slip,status,words", [
    ("background-1", 29.68, "wrong", "multiply-add is two FLOPs"),
    ("background-1", 63.02, "wrong", "output C"),
    ("background-1", 60.5, "close", "too high"),
    ("background-2", 168, "wrong", "V100"),
    ("background-2", 189, "wrong", "A100"),
    ("background-2", 463, "close", "too high"),
    ("background-2", 346, "wrong", "off by more"),
    ("background-3", 0.0678, "wrong", "math time"),
    ("background-3", 40.06, "wrong", "only the read"),
    ("background-3", 801.3, "wrong", "off by more"),
    ("background-4", 87.5, "wrong", "V100"),
    ("background-4", 106.1, "wrong", "off by more"),
])
def test_background_plausible_wrong_answers(exercise_id, slip, status, words):
    verdict = exercises.check(exercise_id, slip)
    assert verdict.status == status and words in verdict.message, verdict


def test_background_exercise_answers_in_the_chapter():
    from pathlib import Path

    text = (CHAPTERS / "01_background.md").read_text(encoding="utf-8")
    problems = text[text.index("\n## Problems"):]
    assert text.index("## What to take away") < text.index("\n## Problems")
    for ex in exercises.all_exercises("01_background"):
        assert f'problems.check("{ex.id}", None)' in problems
        assert f"**{ex.answer_text()}**" in problems


# --------------------------------------------------------------------------------------------
# The waves table: per_wave is pure, None in → None out


def test_per_wave_none_in_none_out():
    from perfkit.book.background.experiments import per_wave

    assert per_wave(None) is None
    assert per_wave(pd.DataFrame(columns=["waves", "time_s"])) is None
    assert isinstance(pk.table(per_wave(None), "no recording", instead="the model above"), pk.display.Note)


def test_per_wave_medians_and_steps_in_one_wave_times():
    from perfkit.book.background.experiments import per_wave

    frame = pd.DataFrame({"waves": [1, 1, 1, 2, 2, 3],
                          "time_s": [10e-6, 11e-6, 12e-6, 21e-6, 23e-6, 33e-6]})
    before = frame.copy()
    t = per_wave(frame)
    pd.testing.assert_frame_equal(frame, before)  # the input is left alone
    assert list(t.columns) == ["waves", "median_time_s", "step (one-wave times)"]
    assert list(t["waves"]) == [1, 2, 3]
    assert list(t["median_time_s"]) == pytest.approx([11e-6, 22e-6, 33e-6])
    assert pd.isna(t["step (one-wave times)"].iloc[0])
    assert list(t["step (one-wave times)"].iloc[1:]) == pytest.approx([1.0, 1.0])
    shown = pk.table(t, seconds={"median_time_s": "µs"})
    assert list(shown.shown.columns) == ["waves", "median time (µs)", "step (one-wave times)"]
    assert "22.00" in str(shown)
