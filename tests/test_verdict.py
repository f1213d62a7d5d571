"""Verdicts computed from data: judge, finding, verdict_table; and the math-bound batch."""

from __future__ import annotations

import math

import pytest

import perfkit as pk


@pytest.mark.parametrize("effect, expected", [(2.0, "holds"), (1.2, "holds"), (1.1, "weaker"), (1.05, "weaker"),
                                              (1.0, "gone"), (0.5, "gone"), (None, "no data yet"),
                                              (math.nan, "no data yet")])
def test_judge_places_the_effect_between_the_thresholds(effect, expected):
    assert pk.judge(effect, holds_at=1.2, gone_below=1.05) == expected


def test_judge_refuses_bad_thresholds_and_effects():
    with pytest.raises(ValueError, match="gone_below .* must not exceed holds_at"):
        pk.judge(1.0, holds_at=1.1, gone_below=1.5)
    with pytest.raises(ValueError, match="must be numbers"):
        pk.judge(1.0, holds_at=None, gone_below=1.0)
    with pytest.raises(TypeError, match="effect must be a number or None"):
        pk.judge("fast", holds_at=1.2, gone_below=1.0)


def test_finding_formats_then_and_now_and_computes_the_verdict():
    f = pk.finding("Pad to ×8", "NVIDIA, 2019", "Tensor Cores need it", now=1.02, then=3.5,
                   holds_at=1.2, gone_below=1.05, where="section 3")
    assert (f.then, f.now, f.unit, f.verdict, f.where) == ("3.50", "1.02", "×", "gone", "section 3")
    g = pk.finding("Batch > 128", "NVIDIA", "math-bound", now=None, holds_at=0.8, gone_below=0.5,
                   fmt="{:.0%}")
    assert (g.then, g.now, g.unit, g.verdict) == ("—", "—", "%", "no data yet")
    share = pk.finding("r", "s", "c", now=0.79, then=0.5, holds_at=0.8, gone_below=0.5, fmt="{:.0%}")
    assert (share.then, share.now, share.unit, share.verdict) == ("50", "79", "%", "weaker")
    size = pk.finding("r", "s", "c", now=1.25, holds_at=2, gone_below=1, fmt="{:.1f} MB")
    assert (size.now, size.unit) == ("1.2", "MB")
    assert pk.finding("r", "s", "c", now=0.87, holds_at=0.8, gone_below=0.5, fmt="{:.2f}").unit == "×"
    with pytest.raises(ValueError, match="fmt"):
        pk.finding("r", "s", "c", now=1, holds_at=1, gone_below=1, fmt="{:.2f} s")
    with pytest.raises(TypeError, match="rule must be a string"):
        pk.finding(1, "s", "c", now=1, holds_at=1, gone_below=1)


def test_verdict_table_has_one_row_per_finding_in_order():
    rows = [pk.finding(f"rule {i}", "src", "claim", now=x, holds_at=1.2, gone_below=1.05)
            for i, x in enumerate([1.5, 1.1, 1.0, None])]
    table = pk.verdict_table(rows)
    assert list(table.columns) == ["rule", "source", "claim", "then", "now", "unit", "verdict", "where"]
    assert list(table["verdict"]) == ["holds", "weaker", "gone", "no data yet"]
    shown = pk.verdict.show(table)
    assert list(shown.frame.columns) == list(pk.verdict._core.SHOWN.values())
    assert shown.frame["What the guide said"][0] == "claim (src)"
    html = shown._repr_html_()
    assert html.count("<tr>") == 5 and "<th>Unit</th>" in html and "perfkit-table" in html
    with pytest.raises(ValueError, match="lacks the columns"):
        pk.verdict.show(table.drop(columns="unit"))
    with pytest.raises(ValueError, match="empty"):
        pk.verdict_table([])
    with pytest.raises(TypeError, match="Finding objects"):
        pk.verdict_table([{"rule": "x"}])


def test_math_bound_batch_reproduces_nvidias_v100_rule_and_grows_with_the_ridge():
    v100, h100 = pk.device_spec("V100-SXM2"), pk.device_spec("H100-SXM")
    b = pk.math_bound_batch(4096, 4096, v100)
    assert 128 < b <= 160  # NVIDIA: "greater than 128"; the facts: between 128 and 160
    assert pk.arithmetic_intensity(4096, b, 4096, "float16") >= v100.ops_per_byte("float16")
    assert pk.arithmetic_intensity(4096, b - 1, 4096, "float16") < v100.ops_per_byte("float16")
    assert pk.math_bound_batch(4096, 4096, h100) > 2 * b
    assert pk.math_bound_batch(64, 64, h100) is None  # never reaches the ridge
    with pytest.raises(ValueError, match="in_features"):
        pk.math_bound_batch(0, 4096, h100)
