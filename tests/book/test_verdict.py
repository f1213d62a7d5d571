"""Verdicts computed from data: judge, finding, verdict_table; what each verdict's "now" rests on
(measured, published, model); and the math-bound batch."""

from __future__ import annotations

import importlib
import math

import pandas as pd
import pytest

import perfkit as pk
from perfkit.book.timing.published import launch_bound_bytes
from perfkit.published_data import HOW_TO_GET, has_published
from perfkit.book.verdict import Evidence
from perfkit.book import scorecard as book
from testkit import H100_NAME, framed


@pytest.mark.parametrize("effect, expected", [(2.0, "holds"), (1.2, "holds"), (1.1, "weaker"), (1.05, "weaker"),
                                              (1.0, "gone"), (0.5, "gone"), (None, "no data yet"),
                                              (math.nan, "no data yet")])
def test_judge_places_the_effect_between_the_thresholds(effect, expected):
    assert pk.book.verdict.judge(effect, holds_at=1.2, gone_below=1.05) == expected


def test_judge_refuses_bad_thresholds_and_effects():
    with pytest.raises(ValueError, match="gone_below .* must not exceed holds_at"):
        pk.book.verdict.judge(1.0, holds_at=1.1, gone_below=1.5)
    with pytest.raises(ValueError, match="must be numbers"):
        pk.book.verdict.judge(1.0, holds_at=None, gone_below=1.0)
    with pytest.raises(TypeError, match="effect must be a number or None"):
        pk.book.verdict.judge("fast", holds_at=1.2, gone_below=1.0)


@pytest.mark.parametrize("effect, expected", [(1.0, "holds"), (0.8, "holds"), (1.25, "holds"), (1.26, "weaker"),
                                              (1.61, "weaker"), (0.79, "weaker"), (2.0, "weaker"), (2.01, "gone"),
                                              (0.49, "gone"), (-0.3, "gone"), (None, "no data yet"),
                                              (math.nan, "no data yet")])
def test_a_band_judges_both_ways(effect, expected):
    band = pk.book.verdict.Band(1.0, holds_within=1.25, gone_beyond=2.0)
    assert (band.holds, band.gone) == ((0.8, 1.25), (0.5, 2.0))
    assert band.judge(effect) == expected
    assert pk.book.verdict.judge(effect, band=band) == expected
    # The one-sided thresholds it replaces pass every effect above 0.8, however far above.
    if effect is not None and not math.isnan(effect) and effect > 1.25:
        assert pk.book.verdict.judge(effect, holds_at=0.8, gone_below=0.5) == "holds"


def test_a_band_is_a_factor_either_way_of_its_target():
    band = pk.book.verdict.Band(2.0, holds_within=1.25, gone_beyond=2.0)
    assert band.holds == (1.6, 2.5) and band.gone == (1.0, 4.0)
    assert [band.judge(x) for x in (1.86, 2.6, 0.9, 4.5)] == ["holds", "weaker", "gone", "gone"]
    assert band.text() == "holds within 1.60–2.50×" and band.text("{:.0%}") == "holds within 160–250 %"


def test_a_band_refuses_bad_input():
    Band = pk.book.verdict.Band
    with pytest.raises(ValueError, match="target must be > 0"):
        Band(0.0, holds_within=1.25, gone_beyond=2)
    with pytest.raises(ValueError, match="holds_within ≤ gone_beyond"):
        Band(1.0, holds_within=2, gone_beyond=1.5)
    with pytest.raises(ValueError, match="holds_within ≤ gone_beyond"):
        Band(1.0, holds_within=0.8, gone_beyond=2)
    with pytest.raises(ValueError, match="gone_beyond must be a finite number"):
        Band(1.0, holds_within=1.25, gone_beyond=math.inf)
    with pytest.raises(TypeError, match="target must be a number"):
        Band("one", holds_within=1.25, gone_beyond=2)
    with pytest.raises(TypeError, match="band must be a Band"):
        pk.book.verdict.judge(1.0, band=(0.8, 1.25))
    with pytest.raises(ValueError, match="not both"):
        pk.book.verdict.judge(1.0, holds_at=0.8, gone_below=0.5, band=Band(1.0, 1.25, 2))


def test_a_two_sided_finding_states_its_band_and_judges_its_evidence_both_ways():
    band = pk.book.verdict.Band(1.0, holds_within=2.0, gone_beyond=5.0)
    f = pk.book.verdict.finding("Bytes predict time", "model", "saves what its bytes are worth", now=5.93,
                                band=band, fmt="{:.0%}")
    assert (f.claim, f.now, f.unit, f.verdict) == ("saves what its bytes are worth; holds within 50–200 %", "593",
                                                   "%", "gone")
    model = Evidence(3.0, "model", "model of H100-SXM")
    g = pk.book.verdict.finding("r", "s", "c", now=None, band=band, instead=model)
    assert (g.claim, g.verdict) == ("c; holds within 0.50–2.00×", "predicted: weaker")
    with pytest.raises(ValueError, match="no one-sided thresholds"):
        pk.book.verdict.finding("r", "s", "c", now=None, band=band,
                                instead=Evidence(3.0, "model", "model of H100-SXM", holds_at=1, gone_below=0.5))
    with pytest.raises(ValueError, match="not both"):
        pk.book.verdict.finding("r", "s", "c", now=1.0, band=band, holds_at=1, gone_below=0.5)
    with pytest.raises(ValueError, match="or give band"):
        pk.book.verdict.finding("r", "s", "c", now=1.0)


#: The book's rules whose claim is a value (about, does not depend on, predicts, ≈), judged both ways;
#: every other rule claims a direction ("faster", "at least"), where more of the effect only helps.
TWO_SIDED = {"Tile quantization", "Wave quantization", "A layer is three GEMMs", "Large tensors stream at copy speed",
             "Pooling is memory-bound", "Bytes saved predict time saved", "A causal mask halves the work",
             "Memory-limited: time is bytes", "A ring's bandwidth does not depend on the GPU count",
             "Bucket the gradients (25 MiB)"}


def test_the_rules_that_claim_a_value_are_judged_within_a_band():
    banded = set()
    for name in book.CHAPTERS:
        table = pk.book.verdict.verdict_table(importlib.import_module(f"perfkit.book.{name}.verdict").findings({}))
        banded |= set(table.loc[table["claim"].str.contains("; holds within "), "rule"])
    assert banded == TWO_SIDED


def test_finding_formats_then_and_now_and_computes_the_verdict():
    f = pk.book.verdict.finding("Pad to ×8", "NVIDIA, 2019", "Tensor Cores need it", now=1.02, then=3.5,
                   holds_at=1.2, gone_below=1.05, where="section 3")
    assert (f.then, f.now, f.unit, f.verdict, f.where) == ("3.50", "1.02", "×", "gone", "section 3")
    g = pk.book.verdict.finding("Batch > 128", "NVIDIA", "math-bound", now=None, holds_at=0.8, gone_below=0.5,
                   fmt="{:.0%}")
    assert (g.then, g.now, g.unit, g.verdict) == ("—", "—", "%", "no data yet")
    share = pk.book.verdict.finding("r", "s", "c", now=0.79, then=0.5, holds_at=0.8, gone_below=0.5, fmt="{:.0%}")
    assert (share.then, share.now, share.unit, share.verdict) == ("50", "79", "%", "weaker")
    size = pk.book.verdict.finding("r", "s", "c", now=1.25, holds_at=2, gone_below=1, fmt="{:.1f} MB")
    assert (size.now, size.unit) == ("1.2", "MB")
    assert pk.book.verdict.finding("r", "s", "c", now=0.87, holds_at=0.8, gone_below=0.5, fmt="{:.2f}").unit == "×"
    with pytest.raises(ValueError, match="fmt"):
        pk.book.verdict.finding("r", "s", "c", now=1, holds_at=1, gone_below=1, fmt="{:.2f} s")
    with pytest.raises(TypeError, match="rule must be a string"):
        pk.book.verdict.finding(1, "s", "c", now=1, holds_at=1, gone_below=1)


def test_verdict_table_has_one_row_per_finding_in_order():
    rows = [pk.book.verdict.finding(f"rule {i}", "src", "claim", now=x, holds_at=1.2, gone_below=1.05)
            for i, x in enumerate([1.5, 1.1, 1.0, None])]
    table = pk.book.verdict.verdict_table(rows)
    assert list(table.columns) == ["rule", "source", "claim", "then", "now", "unit", "verdict", "where", "evidence",
                                   "now_from"]
    assert list(table["verdict"]) == ["holds", "weaker", "gone", "no data yet"]
    assert list(table["evidence"]) == ["measured"] * 3 + [""]
    shown = pk.book.scorecard.show(table, complete=False)
    # no row has a "then": the column is left out
    assert list(shown.frame.columns) == [v for k, v in pk.book.verdict.SHOWN.items() if k != "then"]
    assert shown.frame["What the guide said"][0] == "claim (src)"
    assert shown.frame["Now rests on"][0] == "our measurement"
    html = shown._repr_html_()
    assert html.count('<tr class="evidence-measured">') == 3 and html.count('<tr class="evidence-none">') == 1
    assert "<th>Unit</th>" in html and "perfkit-verdicts" in html
    with pytest.raises(ValueError, match="lacks the columns"):
        pk.book.scorecard.show(table.drop(columns="unit"))
    with pytest.raises(ValueError, match="empty"):
        pk.book.verdict.verdict_table([])
    with pytest.raises(TypeError, match="Finding objects"):
        pk.book.verdict.verdict_table([{"rule": "x"}])


# --------------------------------------------------------------------------------------------
# What a verdict's "now" rests on


def test_a_measurement_comes_first_then_published_then_the_model():
    published = Evidence(1.5, "published", "published by X, measured on H100-SXM (2025)", "their sweep")
    model = Evidence(1.0, "model", "model of H100-SXM", "by construction")
    kw = dict(holds_at=1.2, gone_below=1.05, where="§1")
    measured = pk.book.verdict.finding("r", "s", "c", now=1.3, instead=published, on="ours, recorded on H100-SXM on 2026-01-01", **kw)
    assert (measured.now, measured.verdict, measured.evidence, measured.where) == ("1.30", "holds", "measured", "§1")
    assert measured.now_from == "ours, recorded on H100-SXM on 2026-01-01"
    f = pk.book.verdict.finding("r", "s", "c", now=None, instead=published, **kw)
    assert (f.now, f.verdict, f.evidence, f.now_from, f.where) == ("1.50", "holds", "published",
                                                                    "published by X, measured on H100-SXM (2025)", "their sweep")
    g = pk.book.verdict.finding("r", "s", "c", now=None, instead=model, **kw)
    assert (g.now, g.verdict, g.evidence) == ("1.00", "predicted: gone", "model")
    assert g.verdict in pk.book.verdict.PREDICTIONS and g.verdict not in pk.book.verdict.STATUSES
    # A published number on its own scale brings its own thresholds.
    scaled = Evidence(1.8, "published", "published by Y, measured on H800 (2025)", "M 64 → 128", holds_at=1.59, gone_below=1.26)
    assert pk.book.verdict.finding("r", "s", "c", now=None, instead=scaled, holds_at=4, gone_below=2).verdict == "holds"
    none = pk.book.verdict.finding("r", "s", "c", now=None, instead=Evidence(None, "model", "model of H100-SXM"), **kw)
    assert (none.verdict, none.evidence, none.now_from) == ("no data yet", "", "")


def test_evidence_refuses_bad_input():
    with pytest.raises(ValueError, match="kind must be one of"):
        Evidence(1.0, "measured", "ours")
    with pytest.raises(ValueError, match="now_from"):
        Evidence(1.0, "model", "")
    with pytest.raises(TypeError, match="effect must be a number"):
        Evidence("big", "model", "model of H100-SXM")
    with pytest.raises(TypeError, match="instead must be an Evidence"):
        pk.book.verdict.finding("r", "s", "c", now=None, holds_at=1, gone_below=1, instead=1.5)
    with pytest.raises(ValueError, match="unknown rule keys"):
        pk.book.fully_connected.verdict.findings({}, instead={"batch": None})
    with pytest.raises(TypeError, match="must be an Evidence"):
        pk.book.gemm.verdict.findings({}, instead={"size": 2.0})


def test_shown_predictions_are_styled_apart():
    rows = [pk.book.verdict.finding("measured", "s", "c", now=1.5, on="ours, live on H100-SXM, 2026-01-02", holds_at=1.2, gone_below=1.05),
            pk.book.verdict.finding("published", "s", "c", now=None, holds_at=1.2, gone_below=1.05,
                       instead=Evidence(1.1, "published", "published by Z, measured on H200 (2024)", "their kernels")),
            pk.book.verdict.finding("predicted", "s", "c", now=None, holds_at=1.2, gone_below=1.05,
                       instead=Evidence(2.0, "model", "model of H100-SXM", "the model's sweep"))]
    shown = pk.book.scorecard.show(pk.book.verdict.verdict_table(rows), complete=False)
    html = shown._repr_html_()
    for kind in ("measured", "published", "model"):
        assert html.count(f'<tr class="evidence-{kind}">') == 1
    assert list(shown.frame["Verdict"]) == ["holds", "weaker", "predicted: holds"]
    assert list(shown.frame["Now rests on"]) == ["ours, live on H100-SXM, 2026-01-02",
                                                 "published by Z, measured on H200 (2024): their kernels",
                                                 "model of H100-SXM: the model's sweep"]


def test_measured_from_names_our_recording_or_live_run():
    from perfkit.book.frames import measured_from

    recorded = framed({"M": [1]}, device="H100-SXM", device_kind="gpu", recorded_at="2026-11-20T10:00:00Z")
    assert measured_from(recorded) == "ours, recorded on H100-SXM on 2026-11-20"
    live = framed({"M": [1]}, device_name=H100_NAME, device_kind="gpu", live=True, measured_at="2026-11-21T09:00:00")
    assert measured_from(live) == "ours, live on H100-SXM, 2026-11-21"
    assert measured_from(None) == "our measurement" and measured_from("a label") == "a label"
    with pytest.raises(TypeError, match="on must be"):
        measured_from(3)


def _chapters(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {c: g.set_index("rule") for c, g in table.groupby("chapter")}


def test_without_published_data_every_rule_rests_on_the_model(monkeypatch, tmp_path):
    monkeypatch.setenv("PERFKIT_PUBLISHED", str(tmp_path))
    monkeypatch.setenv("PERFKIT_DATA", str(tmp_path))  # and no recording either
    assert not has_published("xla_h100_gemm")
    table = pk.book.scorecard.book_table()
    assert set(table["evidence"]) == {"model"}, "no recording and no published data: only predictions"
    assert set(table["verdict"]) <= set(pk.book.verdict.PREDICTIONS)
    assert (table["now_from"] == "model of H100-SXM").all()
    # No DeepBench either: a "then" is left only where the guide gave its own number (Baidu's RNN posts).
    assert set(table.loc[table["then"] != "—", "chapter"]) == {"04_recurrent"}
    text = pk.book.scorecard.book_summary(table)
    assert f"{len(table)} rules across 7 chapters: 0 measured on our GPUs, 0 published (none), {len(table)} " \
           "predicted by the model" in text
    html = pk.book.scorecard.book_table_html(table)
    assert html.count('<tr class="evidence-model">') == len(table)


@pytest.mark.slow  # every chapter's verdicts: seconds
def test_published_data_decides_at_least_twelve_rules(monkeypatch, tmp_path):
    if not has_published("xla_h100_gemm"):
        pytest.skip(HOW_TO_GET)
    monkeypatch.setenv("PERFKIT_DATA", str(tmp_path))  # nothing recorded: what the publications decide
    table = pk.book.scorecard.book_table()
    assert (table["evidence"] != "").all(), "every rule rests on a measurement, a publication or the model"
    published = table[table["evidence"] == "published"]
    assert len(published) >= 12
    assert published["now_from"].str.match(r"published by .*, measured on (H100|H200|A100|H800)").all()
    assert set(published["verdict"]) <= {"holds", "weaker", "gone"}
    ch = _chapters(table)
    fc = ch["03_fully_connected"]
    assert fc.loc["Batch > 128 (V100)", "now_from"] == "published by OpenXLA, measured on H100-SXM (2025)"
    # The H100's crossover, computed from XLA's rows as the chapter computes it.
    xla = pk.published("xla_h100_gemm", "H100-SXM")
    sweep = pk.book.fully_connected.verdict.h100_sweep(xla, "bfloat16")
    assert set(sweep["N"]) == {256, 512, 1024, 2048, 4096} and (sweep["M"] == 4096).all()
    fold = pk.book.fully_connected.verdict.crossover_fold(sweep, pk.device_spec("H100-SXM"))
    assert fc.loc["Batch > 128 (V100)", "now"] == f"{fold:.2f}"
    # Nothing about alignment comes from XLA's powers of two.
    aligned = table[table["rule"].str.contains("multiple|divisible|Multiples|Pad", case=False)]
    assert (aligned["evidence"] != "published").all()
    gemm = ch["02_gemm"]
    assert gemm.loc["Small minibatch is memory-bound", "now_from"] == "published by DeepGEMM, measured on H800 (2025)"
    memory = ch["06_memory_limited"]
    assert memory.loc["Small tensors are launch-bound", "now_from"].startswith("published by gpu-benches, measured on H200")
    assert memory.loc["Fuse the ops after a GEMM", "evidence"] == "published"


def test_published_effects_are_computed_from_the_rows():
    if not has_published("liger_memory_bound") or not has_published("deepgemm_fp8"):
        pytest.skip(HOW_TO_GET)
    fp8 = pk.published("deepgemm_fp8")
    dense = fp8[fp8["table"].str.startswith("Normal")].drop_duplicates(["M", "N", "K"], keep="last")
    t = dense.pivot_table(index=["N", "K"], columns="M", values="tflops")
    assert pk.book.gemm.verdict.deepgemm_small_m_gain(fp8) == pytest.approx((t[128] / t[64]).median())
    h100 = pk.device_spec("H100-SXM")
    liger = pk.published("liger_memory_bound")
    e = pk.book.memory_limited.verdict.liger_effects(liger, h100)
    fused = liger[(liger["device"] == "H100-SXM") & liger["provider"].isin(["liger", "liger_fused_add_rms_norm"])
                  & (liger["mode"] == "forward") & liger["io_bytes_fwd"].notna()]
    big = fused.loc[fused.groupby("kernel")["x_value"].idxmax()]
    gbps = big["io_bytes_fwd"] / big["time_s"]  # Liger's lower-bound bytes: within 1 % of the byte model's
    assert e["near_copy"] == pytest.approx(gbps.max() / h100.mem_bandwidth, rel=0.01) and e["near_copy"] < 1
    assert e["spread"] == pytest.approx(gbps.min() / gbps.max(), rel=0.01)
    norm = big.set_index("kernel").loc["layer_norm"]
    assert e["bn_saving"] == pytest.approx(1.5 * norm["io_bytes_fwd"] / norm["time_s"] / h100.mem_bandwidth)
    assert e["fusion_gain"] > 1 and 0.5 < e["fusion_realised"] < 2
    assert pk.book.memory_limited.verdict.liger_effects(None, h100)["spread"] is None
    small = pk.published("gpu_benches_small_kernels")
    knee = pk.book.memory_limited.verdict.launch_knee(small)
    assert knee == pytest.approx(launch_bound_bytes(small, "launch", 2.0) / 1e6) and 1 < knee < 100
    assert pk.book.memory_limited.verdict.launch_knee(None) is None


def test_alternatives_fall_back_to_the_model_rule_by_rule():
    for name in book.CHAPTERS:
        module = importlib.import_module(f"perfkit.book.{name}.verdict")
        alt = module.alternatives({})
        rules = module.RULES if hasattr(module, "RULES") else module.EFFECTS
        assert list(alt) == list(rules)
        assert all(e is not None and e.kind == "model" and e.now_from == "model of H100-SXM" for e in alt.values())
        table = pk.book.verdict.verdict_table(module.findings({}, instead=alt))
        assert (table["evidence"] == "model").all() and table["verdict"].str.startswith("predicted: ").all()
        assert len(table) == len(pk.book.verdict.verdict_table(module.findings({})))


@pytest.mark.slow  # every chapter's verdicts: seconds
def test_show_completes_a_chapter_table_like_the_book(monkeypatch, tmp_path):
    monkeypatch.setenv("PERFKIT_DATA", str(tmp_path))  # the book's table without recordings, like findings({})
    table = pk.book.verdict.verdict_table(pk.book.convolutions.verdict.findings({}))
    assert (table["verdict"] == "no data yet").all()
    shown = pk.book.scorecard.show(table)
    assert shown.frame["Verdict"].str.startswith("predicted: ").all()
    assert '<tr class="evidence-model">' in shown._repr_html_()
    book_rows = pk.book.scorecard.book_table().query("chapter == '05_convolutions'")
    assert list(shown.frame["Now"]) == list(book_rows["now"])
    other = pk.book.verdict.verdict_table([pk.book.verdict.finding("not a book rule", "s", "c", now=None, holds_at=1, gone_below=1)])
    assert list(pk.book.scorecard.show(other).frame["Verdict"]) == ["no data yet"]


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
