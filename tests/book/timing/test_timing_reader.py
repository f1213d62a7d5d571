"""Chapter 90_timing for its reader: the figure of samples settling, the problems, and a bar
chart whose log axis hides no bar."""

from __future__ import annotations

import datetime as dt

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import perfkit as pk  # noqa: E402
from perfkit.book import problems as exercises  # noqa: E402
from perfkit.book.timing import interactive as timing  # noqa: E402
from perfkit.book.interactive import MAX_HTML_BYTES, html_bytes  # noqa: E402
from perfkit.book.timing.figures import plot_timers  # noqa: E402
from perfkit.units import format_percent, format_time  # noqa: E402
from figure_helpers import steps as _steps  # noqa: E402
from testkit import CHAPTERS, heading_text

#: Four calls of 2 ms, then one of 20 ms, and again: the chapter's "sometimes slow" function.
SLOW_EVERY_FIFTH = np.array([0.020 if i % 5 == 4 else 0.002 + 1e-6 * i for i in range(30)])




def test_samples_settle_reads_out_the_statistics_of_the_first_k():
    m = pk.Measurement(SLOW_EVERY_FIFTH, label="sometimes slow", device="CPU (test)")
    fig = timing.samples_settle(m, source="live on CPU (test), 2026-11-22")
    steps = _steps(fig)
    assert [int(label) for label, _ in steps] == list(range(1, 31))  # n ≤ steps: every k
    assert fig.figure.layout.sliders[0].active == len(steps) - 1
    for label, (data, layout) in steps:
        k = int(label)
        first = pk.Measurement(SLOW_EVERY_FIFTH[:k])
        assert data["x"][5] == [k, k]
        assert data["y"][5] == pytest.approx([first.median, first.mean], rel=1e-4)
        assert layout["shapes[0].x0"] == k + 0.5  # the samples not yet kept are covered
        text = layout["annotations[0].text"]
        assert f"first {k} of 30 samples: median {format_time(first.median)}" in text
        assert f"({format_percent(first.noise)} of the median" in text
        assert f"mean {format_time(first.mean)}" in text
    # The mean jumps at the first slow sample (k = 5); the median does not move.
    by = {int(label): args[0]["y"][5] for label, args in steps}
    assert by[5][1] > 2 * by[4][1] and by[5][0] == pytest.approx(by[4][0], rel=0.01)
    # The drawn curves are Measurement's own statistics of the first j samples.
    d = fig.figure.data
    assert list(d[2].y) == pytest.approx(SLOW_EVERY_FIFTH.tolist(), rel=1e-4)
    for j, med, p25, p75 in zip(d[3].x, d[3].y, d[1].y, d[0].y):
        first = pk.Measurement(SLOW_EVERY_FIFTH[:j])
        assert (med, p25, p75) == pytest.approx((first.median, first.p25, first.p75), rel=1e-4)
    assert "live on CPU (test), 2026-11-22" in heading_text(fig)


def test_samples_settle_axis_shows_every_sample_with_format_time_ticks():
    m = pk.Measurement(SLOW_EVERY_FIFTH, label="sometimes slow")
    y = timing.samples_settle(m, source="test").figure.layout.yaxis
    assert y.type == "log"  # 2 ms and 20 ms: a log axis
    lo, hi = y.range
    assert 10 ** lo < SLOW_EVERY_FIFTH.min() and SLOW_EVERY_FIFTH.max() < 10 ** hi
    assert list(y.ticktext) == [format_time(v) for v in y.tickvals]
    tight = pk.Measurement(np.linspace(30e-3, 36e-3, 10))
    y = timing.samples_settle(tight, source="test").figure.layout.yaxis
    assert y.type == "linear" and y.range[0] < 30e-3 and 36e-3 < y.range[1]
    assert all(t.endswith("ms") for t in y.ticktext)


def test_samples_settle_many_samples_stay_small():
    m = pk.Measurement(np.random.default_rng(0).lognormal(-9, 0.3, 1000))
    fig = timing.samples_settle(m, source="test", steps=40)
    ks = [int(label) for label, _ in _steps(fig)]
    assert ks[0] == 1 and ks[-1] == 1000 and len(ks) <= 41 and ks == sorted(set(ks))
    assert len(fig.figure.data[3].x) <= 151
    assert html_bytes(fig) < MAX_HTML_BYTES


def test_samples_settle_default_is_a_live_cpu_measurement_dated_today():
    before = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    fig = timing.samples_settle()
    after = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    title = heading_text(fig)
    # the run may straddle midnight (UTC): its date is the one before or after it
    assert "live on" in title and (before in title or after in title) and pk.devices.cpu_name() in title
    assert len(fig.states) >= 2


def test_samples_settle_bad_input():
    m = pk.Measurement([1e-3, 2e-3, 3e-3])
    with pytest.raises(TypeError, match="Measurement"):
        timing.samples_settle([1e-3, 2e-3])
    with pytest.raises(ValueError, match="two samples"):
        timing.samples_settle(pk.Measurement([1e-3]))
    with pytest.raises(ValueError, match="steps"):
        timing.samples_settle(m, steps=1)
    with pytest.raises(ValueError, match="steps"):
        timing.samples_settle(m, steps=0)
    with pytest.raises(TypeError, match="source"):
        timing.samples_settle(m, source=3)


def test_plot_timers_log_axis_hides_no_bar():
    frame = pd.DataFrame({"case": ["a", "b", "c"], "perfkit_time_s": [0.024, 0.025, 0.1],
                          "perfkit_graph_time_s": np.nan, "triton_do_bench_s": np.nan,
                          "torch_timer_s": [0.024, 0.026, 0.11]})
    fig = plot_timers(frame, "live on CPU (test), 2026-11-22")
    (ax,) = fig.axes
    low, high = ax.get_ylim()
    assert low <= 0.024 / 2 and high > 0.11
    heights = [p.get_height() for p in ax.patches]
    assert len(heights) == 6 and min(heights) == pytest.approx(0.024)
    plt.close(fig)


# --------------------------------------------------------------------------------------------
# Problems


def test_timing_exercises_answers():
    ids = [ex.id for ex in exercises.all_exercises("90_timing")]
    assert ids == ["timing-1", "timing-2", "timing-3", "timing-4"]
    assert exercises.answer("timing-1") == pytest.approx(2.1)
    m = pk.Measurement(np.array(pk.book.timing.problems.BUSY_MS) * 1e-3)
    assert pk.measurement.NOISE_THRESHOLD < m.noise < pk.measurement.GROSS_NOISE_THRESHOLD
    assert exercises.answer("timing-2") == "noisy"
    assert exercises.answer("timing-3") == pytest.approx(pk.timing.to_tflop_s(160e-6, pk.gemm_flops(4096, 4096, 4096)))
    assert exercises.answer("timing-4") == 5


@pytest.mark.parametrize("exercise_id,slip,status,words", [
    ("timing-1", 5.65, "wrong", "mean"),
    ("timing-1", 2.0, "close", "too low"),
    ("timing-1", 2100, "wrong", "off by more"),
    ("timing-2", "very noisy", "wrong", "full range"),
    ("timing-2", "quiet", "wrong", "IQR"),
    ("timing-2", "loud", "wrong", "not one of the choices"),
    ("timing-3", 429.5, "wrong", "two FLOPs"),
    ("timing-3", 0.859, "wrong", "milliseconds"),
    ("timing-3", 900, "close", "too high"),
    ("timing-4", 10, "wrong", "max_time_s"),
    ("timing-4", 1000, "wrong", "off by more"),
])
def test_timing_plausible_wrong_answers(exercise_id, slip, status, words):
    verdict = exercises.check(exercise_id, slip)
    assert verdict.status == status and words in verdict.message, verdict


def test_timing_exercise_answers_in_the_chapter():
    from pathlib import Path

    text = (CHAPTERS / "90_timing.md").read_text(encoding="utf-8")
    problems = text[text.index("\n## Problems"):]
    for ex in exercises.all_exercises("90_timing"):
        assert f'problems.check("{ex.id}", None)' in problems
        assert f"**{ex.answer_text()}**" in problems


# --------------------------------------------------------------------------------------------
# The chapter's table of timers


def test_timer_table_passes_no_recording_through_as_none():
    assert pk.book.timing.experiments.timer_table(None) is None
    note = pk.table(pk.book.timing.experiments.timer_table(None), pk.provenance.missing("no GPU"),
                    instead="the CPU run below")
    assert isinstance(note, pk.display.Note) and note.instead == "the CPU run below"


def test_timer_table_writes_times_with_units_and_drops_timers_that_never_ran():
    nan = float("nan")
    gpu = pd.DataFrame({"case": ["add", "gemm"], "perfkit_time_s": [5e-6, 2e-3],
                        "perfkit_graph_time_s": [3e-6, 2e-3], "triton_do_bench_s": [6e-6, 2.02e-3],
                        "torch_timer_s": [2.5e-6, nan], "perfkit_vs_do_bench": [5 / 6 - 1, 2 / 2.02 - 1],
                        "perfkit_vs_torch_timer": [1.0, nan]})
    out = pk.book.timing.experiments.timer_table(gpu)
    assert list(out.columns) == ["case", "perfkit.bench", "perfkit, CUDA graph", "do_bench", "torch Timer",
                                 "perfkit vs do_bench", "perfkit vs Timer"]
    assert list(out["perfkit.bench"]) == [format_time(5e-6), format_time(2e-3)]
    assert list(out["torch Timer"]) == [format_time(2.5e-6), "–"]
    assert list(out["perfkit vs do_bench"]) == ["-16.7%", "-1.0%"]
    cpu = gpu.assign(perfkit_graph_time_s=nan, triton_do_bench_s=nan, perfkit_vs_do_bench=nan)
    out = pk.book.timing.experiments.timer_table(cpu)
    assert list(out.columns) == ["case", "perfkit.bench", "torch Timer", "perfkit vs Timer"]
    assert "perfkit.bench" in str(pk.table(out))



# --------------------------------------------------------------------------------------------
# The book GPU's profile, as the appendix shows it


def test_profile_table_can_leave_out_how_each_ceiling_was_measured():
    found = pk.book.timing.book_gpu_profile()
    if found is None:
        pytest.skip("no GPU calibration profile in data/")
    full = pk.book.timing.profile_table(found)
    short = pk.book.timing.profile_table(found, how=False)
    assert "how it was measured" in full.shown.columns
    assert list(short.shown.columns) == [c for c in full.shown.columns if c != "how it was measured"]
    assert str(pk.book.timing.profile_source(found[0], live=False)) in str(short)
    note = pk.book.timing.profile_table(None, how=False, absent="no GPU profile in data/")
    assert isinstance(note, pk.display.Note)
