"""Figures of the advisor chapter: drawn from real advice (model predictions for an H100, on the meta
device) and from real CPU runs of ``advisor_layers`` and ``advisor_fixes``; each is captioned with
where its numbers come from, and none is drawn without data."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.ticker import EngFormatter  # noqa: E402

import perfkit as pk  # noqa: E402
from perfkit import book  # noqa: E402
from perfkit.book.check_your_model import experiments as ex  # noqa: E402
from perfkit.book.check_your_model.figures import KINDS, op_kind  # noqa: E402
from figure_helpers import note_of
from testkit import RECORDED_LABEL, heading_text

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # few samples and noise: expected here
MODEL = "model of H100-SXM"


def _heading(fig) -> str:
    """Every title of ``fig`` (suptitle and Axes titles), with line wrapping undone."""
    titles = [heading_text(fig)]
    return " ".join(" ".join(titles).split())


def _texts(fig) -> str:
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts)


@pytest.fixture(scope="module")
def advices():
    """Real advice for an H100 in bfloat16: the LSTM LM at its real size, the shrunk GPT-2 and ResNet-50."""
    out = {}
    for name in ("lstm_lm", "gpt2_small", "resnet50"):
        model, x = ex.model_inputs(name, "cuda" if name == "lstm_lm" else "cpu", meta=True)
        out[name] = pk.advise(model, x, "bfloat16", "H100-SXM")
    return out


@pytest.fixture
def layers(short_bench):
    return ex.advisor_layers(device="cpu", progress=False, models=["lstm_lm"])


@pytest.fixture
def fixes(short_bench):
    return ex.advisor_fixes(device="cpu", progress=False, models=["lstm_lm"])


def test_op_kinds_cover_the_advisors_ops_and_the_experiments_functions():
    assert [op_kind(o) for o in ("linear", "conv", "attention", "matmul", "rnn.l0.recurrent")] == list(KINDS[:5])
    assert op_kind("conv.nchw_transpose") == "memory-bound"  # copies around an NCHW convolution
    assert [op_kind(o) for o in ("conv2d", "scaled_dot_product_attention", "lstm", "bmm", "baddbmm")] == [
        "conv", "attention", "rnn", "matmul", "matmul"]
    assert {op_kind(o) for o in ("layernorm", "layer_norm", "gelu", "add", "embedding", "dropout")} == {
        "memory-bound"}


def test_step_breakdown_splits_each_step_by_kind_of_work(advices):
    fig = book.check_your_model.plot_step_breakdown(advices)
    assert MODEL in _heading(fig)
    ax = fig.axes[0]
    bars = [p for p in ax.patches if p.get_width() > 0]
    ends = {}
    for p in bars:  # one stacked bar per model: its segments end at 100 %
        y = round(p.get_y(), 6)
        ends[y] = max(ends.get(y, 0), p.get_x() + p.get_width())
    assert len(ends) == 3 and all(e == pytest.approx(1) for e in ends.values())
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"linear", "conv", "rnn", "memory-bound"} <= set(legend) <= set(KINDS)
    labels = " ".join(t.get_text() for t in ax.get_yticklabels())
    assert all(name in labels for name in advices) and "bfloat16 training step" in labels


def test_step_breakdown_of_one_advice_draws_into_the_given_axes(advices):
    fig, (left, right) = plt.subplots(1, 2)
    assert book.check_your_model.plot_step_breakdown(advices["lstm_lm"], ax=right) is fig
    assert not left.has_data() and MODEL in " ".join(heading_text(right).split())
    assert "LSTMLanguageModel" in " ".join(t.get_text() for t in right.get_yticklabels())


def test_savings_draws_each_priced_rule_and_marks_the_others(advices):
    fig = book.check_your_model.plot_savings(advices)
    assert MODEL in _heading(fig)
    rows = [(name, rule, r.share) for name, a in advices.items() for rule, r in a.by_rule().iterrows()]
    priced = [s for _, _, s in rows if np.isfinite(s) and s > 0]
    ax = fig.axes[0]
    assert sorted(p.get_width() for p in ax.patches) == pytest.approx(sorted(priced))
    assert len(ax.get_yticklabels()) == len(rows)
    assert len(priced) < len(rows) and "no saving priced" in _texts(fig)  # e.g. the CPU GPT-2's alignment
    assert "lstm_lm: small_batch" in " ".join(t.get_text() for t in ax.get_yticklabels())


def test_advice_vs_measured_from_a_cpu_run(layers):
    fig = book.check_your_model.plot_advice_vs_measured(layers)
    assert "live on CPU" in _heading(fig) and "median |error|" in _heading(fig)
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert all(isinstance(a.get_major_formatter(), EngFormatter) for a in (ax.xaxis, ax.yaxis))
    legends = [t.get_text() for c in ax.get_children() if isinstance(c, matplotlib.legend.Legend)
               for t in c.get_texts()]
    assert any(t.startswith("lstm_lm: median |error|") for t in legends) and "rnn" in legends
    drawn = sum(len(line.get_xdata()) for line in ax.lines if line.get_linestyle() == "None")
    assert drawn == len(layers)


def test_advice_vs_measured_draws_into_the_given_axes(layers):
    fig, (left, right) = plt.subplots(1, 2)
    assert book.check_your_model.plot_advice_vs_measured(layers, ax=right) is fig and not left.has_data()


@pytest.mark.slow  # rests on a real CPU run of advisor_fixes: seconds
def test_fix_savings_from_a_cpu_run(fixes):
    fig = book.check_your_model.plot_fix_savings(fixes)
    assert "live on CPU" in _heading(fig)
    ax = fig.axes[0]
    assert ax.get_xscale() == "symlog" and isinstance(ax.xaxis.get_major_formatter(), EngFormatter)
    assert len(ax.patches) == 2 * len(fixes)  # measured and predicted, per fix
    widths = sorted(p.get_width() for p in ax.patches)
    expected = sorted([*fixes["measured_saving_s"], *fixes["predicted_saving_s"]])
    assert widths == pytest.approx(expected)
    one = book.check_your_model.plot_fix_savings(fixes, max_rows=1)
    assert len(one.axes[0].patches) == 2 and f"the 1 largest of {len(fixes)}" in _heading(one)


@pytest.mark.slow  # rests on a real CPU run of advisor_fixes: seconds
def test_hand_built_frames_need_a_source(layers, fixes):
    for plot, frame in ((book.check_your_model.plot_advice_vs_measured, layers), (book.check_your_model.plot_fix_savings, fixes)):
        bare = pd.DataFrame(frame)
        bare.attrs = {}
        with pytest.raises(ValueError, match="source="):
            plot(bare)
        assert RECORDED_LABEL in _heading(plot(bare, RECORDED_LABEL))
        with pytest.raises(ValueError, match="contradicts"):
            plot(frame, RECORDED_LABEL)


@pytest.mark.parametrize("plot", [book.check_your_model.plot_advice_vs_measured, book.check_your_model.plot_fix_savings])
def test_no_frame_prints_one_line(plot, capsys):
    missing = pk.provenance.missing("no recording of 'advisor_layers' in data/ yet")
    assert note_of(plot(None, missing)) == "No recording yet: No recording of 'advisor_layers' in data/ yet"


def test_empty_frame_and_no_advice_print_one_line(layers, capsys):
    assert "Nothing to draw: The frame has no rows (live on CPU" in note_of(book.check_your_model.plot_advice_vs_measured(layers.iloc[:0]))
    for plot in (book.check_your_model.plot_step_breakdown, book.check_your_model.plot_savings):
        assert all(note_of(p).startswith("Nothing to draw: No advice") for p in (plot(None), plot({})))


@pytest.mark.slow  # rests on a real CPU run of advisor_fixes: seconds
def test_bad_arguments_are_refused(advices, fixes):
    with pytest.raises(TypeError, match="Advice"):
        book.check_your_model.plot_step_breakdown(["not advice"])
    with pytest.raises(TypeError, match=r"advices\['x'\]"):
        book.check_your_model.plot_savings({"x": 3})
    with pytest.raises(ValueError, match="max_rows"):
        book.check_your_model.plot_fix_savings(fixes, max_rows=0)
