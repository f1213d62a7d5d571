"""Chapter 07 (check your model) for the reader: its interactive model menu and its problems."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import perfkit as pk
from perfkit.advisor import RULES
from perfkit.book.check_your_model import problems as problems
from perfkit.book.check_your_model import interactive as interactive
from perfkit.book.interactive import MAX_HTML_BYTES, figure_json, html_bytes
from perfkit.book.check_your_model.figures import KINDS, op_kind

from testkit import heading_text


def _advise(build, shape, dtype=torch.long, **kwargs):
    with torch.device("meta"):
        model, inputs = build(), torch.zeros(shape, dtype=dtype)
    return pk.advise(model, inputs, "bfloat16", "H100-SXM", **kwargs)


@pytest.fixture(scope="module")
def advices():
    """Three small models whose predicted steps differ in kind: a transformer, a CNN and an LSTM."""
    return {"GPT-2 (1 layer)": _advise(lambda: pk.zoo.gpt2_small(layers=1), (4, 1024)),
            "ResNet-50": _advise(pk.zoo.resnet50, (8, 3, 224, 224), torch.float32),
            "LSTM LM": _advise(pk.zoo.lstm_lm, (20, 35))}


@pytest.fixture(scope="module")
def menu(advices):
    return interactive.model_menu(advices)


def _buttons(menu):
    return figure_json(menu)["layout"]["updatemenus"][0]["buttons"]


# ------------------------------------------------------------------------------ the model menu
def test_every_registered_figure_builds_with_its_defaults():
    for name, build in interactive.FIGURES.items():
        fig = build()
        assert html_bytes(fig) < MAX_HTML_BYTES, name
        assert len(fig.states) == 4 and "model of H100-SXM" in heading_text(fig)


def test_one_menu_entry_per_model_in_order(menu, advices):
    assert menu.states == list(advices)
    assert menu.name == "advisor-model-menu" and all(name in menu.alt for name in advices)
    assert html_bytes(menu) < MAX_HTML_BYTES


def test_each_state_shows_its_models_step_by_kind(menu, advices):
    for button, (name, advice) in zip(_buttons(menu), advices.items()):
        kinds = button["args"][0]["x"][0]
        layers = advice.layers
        for kind, share in zip(KINDS, kinds):
            seconds = layers.loc[layers["op"].map(op_kind) == kind, "predicted_s"].sum()
            assert math.isclose(share, seconds / advice.step_s, rel_tol=1e-4, abs_tol=1e-9), (name, kind)
        assert math.isclose(sum(kinds), 1.0, rel_tol=1e-3)
        assert pk.units.format_time(advice.step_s) in button["args"][1]["title.text"]
    shares = {b["label"]: dict(zip(KINDS, b["args"][0]["x"][0])) for b in _buttons(menu)}
    assert shares["LSTM LM"]["rnn"] > 0.5 and shares["GPT-2 (1 layer)"]["rnn"] == 0
    assert shares["ResNet-50"]["conv"] > 0.2 and shares["LSTM LM"]["conv"] == 0


def test_each_state_shows_each_rules_saving_from_by_rule(menu, advices):
    for button, (name, advice) in zip(_buttons(menu), advices.items()):
        x, text = button["args"][0]["x"][1], button["args"][0]["text"][1]
        colours = button["args"][0]["marker.color"][1]
        assert [c == interactive.UNPRICED for c in colours] == [share == 0 for share in x]
        table = advice.by_rule()
        for rule, share, label in zip(RULES, x, text):
            if rule not in table.index:
                assert share == 0 and label == "", (name, rule)
            elif table.loc[rule, "predicted_saving_s"] > 0:
                assert math.isclose(share, table.loc[rule, "share"], rel_tol=1e-4), (name, rule)
                assert pk.units.format_time(table.loc[rule, "predicted_saving_s"]) in label
            else:
                assert share == 0 and "no saving priced" in label, (name, rule)
    savings = {b["label"]: dict(zip(RULES, b["args"][0]["x"][1])) for b in _buttons(menu)}
    assert savings["ResNet-50"]["layout"] > 0 and savings["LSTM LM"]["layout"] == 0
    assert savings["LSTM LM"]["small_batch"] > savings["GPT-2 (1 layer)"]["small_batch"]


def test_every_state_updates_the_same_properties(menu):
    keys = [sorted(b["args"][0]) for b in _buttons(menu)]
    assert all(k == keys[0] for k in keys) and "marker.color" in keys[0]


def test_the_menu_opens_on_the_model_asked_for(advices):
    fig = interactive.model_menu(advices, active="LSTM LM")
    assert fig.figure.layout.updatemenus[0].active == 2
    assert fig.figure.layout.title.text.startswith("LSTM LM")


def test_bad_input_is_refused(advices):
    with pytest.raises(TypeError, match="advices"):
        interactive.model_menu(list(advices.values()))
    with pytest.raises(TypeError, match="advices"):
        interactive.model_menu({"a": advices["LSTM LM"], "b": "not advice"})
    with pytest.raises(ValueError, match="at least two"):
        interactive.model_menu({"LSTM LM": advices["LSTM LM"]})
    with pytest.raises(LookupError, match="active"):
        interactive.model_menu(advices, active="BERT")
    with pytest.raises(ValueError, match="active"):
        interactive.model_menu(advices, active=7)


# ------------------------------------------------------------------------------ the problems
def test_the_chapters_problems_in_order():
    assert [ex.id for ex in problems.EXERCISES] == ["advisor-1", "advisor-2", "advisor-3", "advisor-4"]
    for ex in problems.EXERCISES:
        assert pk.book.problems.check(ex.id, ex.answer()).status == "right"
        assert pk.book.problems.check(ex.id, None).status == "unanswered"


def test_problem_1_counts_the_linear_layers_the_token_finding_names():
    advice = _advise(pk.zoo.gpt2_small, (7, 1023), rules=["alignment"])
    token = advice.findings.query("rule == 'alignment' and layer == ''").iloc[0]
    n = pk.book.problems.answer("advisor-1")
    assert f"in {n} linear layers" in token.message and "7161 rows per step" in token.message
    # the solution: priced at the same batch, the padded rows are extra work and save nothing the model prices
    assert token.severity == "info" and token.predicted_saving_s <= 0
    assert "wrong" == pk.book.problems.check("advisor-1", n + 1).status
    assert "lm_head" in pk.book.problems.check("advisor-1", n - 1).message
    assert "batch × sequence" in pk.book.problems.check("advisor-1", 0).message


def test_problem_2_is_where_the_mlps_small_batch_finding_stops():
    star = pk.book.problems.answer("advisor-2")
    for tokens, fires in ((star - 1, True), (star, False)):
        advice = _advise(lambda: pk.zoo.gpt2_small(layers=1), (1, tokens), rules=["small_batch"])
        assert ("blocks.0.mlp.fc" in set(advice.findings["layer"])) is fires, tokens
    assert "V100" in pk.book.problems.check("advisor-2", 180).message
    assert "output projection" in pk.book.problems.check("advisor-2", 1280).message
    assert pk.book.problems.check("advisor-2", round(star * 1.03)).status == "close"


def test_problem_3_is_where_the_lstms_small_batch_finding_stops():
    star = pk.book.problems.answer("advisor-3")
    assert 256 < star <= 512
    for batch, fires in ((star - 1, True), (star, False)):
        advice = _advise(lambda: pk.zoo.lstm_lm(layers=1), (batch, 3), rules=["small_batch"])
        assert ("lstm" in set(advice.findings["layer"])) is fires, batch
    assert "four gates" in pk.book.problems.check("advisor-3", 722).message
    assert "rnn_sizes" in pk.book.problems.check("advisor-3", 24).message


@pytest.mark.slow  # advises whole models: seconds
def test_problem_4_attention_grows_and_the_linear_layers_do_not():
    growth = pk.book.problems.answer("advisor-4")
    # four times the FLOPs; 3.8 times the causal score blocks, and the same number of thread blocks' fixed costs
    assert 3.0 < growth < 3.5
    full = {}
    for shape in ((4, 2048), (1, 8192)):  # the whole 32-layer model: the same factor
        layers = _advise(lambda: pk.zoo.llama(context=8192), shape, rules=[]).layers
        full[shape] = {op: layers.loc[layers["op"] == op, "predicted_s"].sum() for op in ("attention", "linear")}
    assert math.isclose(full[(1, 8192)]["attention"] / full[(4, 2048)]["attention"], growth, rel_tol=1e-9)
    assert math.isclose(full[(1, 8192)]["linear"], full[(4, 2048)]["linear"], rel_tol=1e-12)
    assert "4 sequences became 1" in pk.book.problems.check("advisor-4", 16).message
    assert "same" in pk.book.problems.check("advisor-4", 1).message
    assert "FLOPs, not of its time" in pk.book.problems.check("advisor-4", 4).message
    assert pk.book.problems.check("advisor-4", round(growth * 1.05, 2)).status == "close"


# ------------------------------------------------------------------------------ the chapter's tables
def test_rule_summary_is_by_rule_in_seconds_and_none_in_none_out(advices):
    from perfkit.book.check_your_model.experiments import rule_summary

    assert rule_summary(None) is None
    resnet = advices["ResNet-50"]
    t, by_rule = rule_summary(resnet), resnet.by_rule()
    assert list(t.columns) == ["rule", "findings", "predicted_saving_s", "share of the step", "example"]
    assert list(t["rule"]) == list(by_rule.index)
    assert list(t["findings"]) == list(by_rule["findings"])
    assert t["predicted_saving_s"].to_numpy() == pytest.approx(by_rule["predicted_saving_s"].to_numpy(),
                                                               nan_ok=True)
    shown = pk.table(t, seconds={"predicted_saving_s": "µs"}, formats={"predicted saving (µs)": "{:,.0f}"})
    assert list(shown.shown.columns)[2] == "predicted saving (µs)"
    assert "layout" in str(shown)
    layout = by_rule.loc["layout", "predicted_saving_s"]
    assert f"{layout * 1e6:,.0f}" in str(shown)


@pytest.mark.slow  # advises whole models: seconds
def test_step_summary_splits_each_step_by_what_sets_its_time():
    from perfkit.book.check_your_model.experiments import step_summary

    assert step_summary(None) is None and step_summary({}) is None
    cnns = {"ResNet-50": _advise(pk.zoo.resnet50, (8, 3, 224, 224), torch.float32),
            "MobileNetV2": _advise(pk.zoo.mobilenet_v2, (8, 3, 224, 224), torch.float32)}
    t = step_summary(cnns).set_index("model")
    assert list(t.columns) == ["predicted_step_s", "forward GFLOP", "memory-bound share", "in direct convolutions"]
    builders = {"ResNet-50": pk.zoo.resnet50, "MobileNetV2": pk.zoo.mobilenet_v2}
    for name, advice in cnns.items():
        assert t.loc[name, "predicted_step_s"] == pytest.approx(advice.step_s)
        assert t.loc[name, "memory-bound share"] == pytest.approx(advice.memory_bound_share)
        with torch.device("meta"):
            model, images = builders[name](), torch.zeros(8, 3, 224, 224)
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            model(images)
        assert t.loc[name, "forward GFLOP"] == pytest.approx(counter.get_total_flops() / 1e9, rel=1e-9)
    assert t.loc["ResNet-50", "in direct convolutions"] == 0  # dense convolutions are GEMMs
    direct = cnns["MobileNetV2"].layers.query("op == 'conv.direct'")["predicted_s"].sum()
    assert direct > 0 and t.loc["MobileNetV2", "in direct convolutions"] == pytest.approx(
        direct / cnns["MobileNetV2"].step_s)


def test_largest_savings_names_each_models_top_rule(advices):
    from perfkit.book.check_your_model.experiments import largest_savings

    assert largest_savings(None) is None and largest_savings({}) is None
    t = largest_savings(advices).set_index("model")
    assert list(t.index) == list(advices)
    for name, advice in advices.items():
        share = advice.by_rule()["share"]
        assert t.loc[name, "largest predicted saving from"] == share.idxmax()
        assert t.loc[name, "share of the step"] == pytest.approx(share.max())
    assert t.loc["LSTM LM", "largest predicted saving from"] == "small_batch"


def test_finding_savings_with_and_without_measurements(advices):
    from perfkit.book.check_your_model.experiments import finding_savings

    assert finding_savings(None) is None
    lstm = advices["LSTM LM"]
    t = finding_savings(lstm)
    assert list(t.columns) == ["layer", "rule", "predicted_saving_s"]
    assert len(t) == len(lstm.findings) and "" not in set(t["layer"])
    mine = torch.nn.Sequential(torch.nn.Linear(64, 100), torch.nn.Linear(100, 10))
    here = pk.advise(mine, torch.randn(12, 64), "float32", pk.current_device(), training=False,
                     rules=["alignment"])
    here.measure(progress=False)
    t = finding_savings(here)
    assert list(t.columns)[-1] == "measured_saving_s"
    assert t["measured_saving_s"].to_numpy() == pytest.approx(
        here.findings["measured_saving_s"].to_numpy(), nan_ok=True)
    shown = pk.table(t, seconds={"predicted_saving_s": "µs", "measured_saving_s": "µs"})
    assert list(shown.shown.columns) == ["layer", "rule", "predicted saving (µs)", "measured saving (µs)"]


def test_the_cpu_stand_in_is_the_experiment_on_the_cpu_labelled_by_its_own_metadata():
    """Chapter 7 draws ``advisor_fixes(device="cpu")`` where the GPU recording is missing: the
    frame says itself that it was measured live on this CPU, in float32, and the figure says so."""
    from perfkit.book.check_your_model import experiments as experiments

    frame = experiments.advisor_fixes(models=["lstm_lm"], device="cpu", progress=False)
    source = pk.source_of(frame)
    assert source.kind == "live" and pk.current_device().label in str(source)
    assert len(frame) and set(frame["dtype"]) == {"float32"} and set(frame["model"]) == {"lstm_lm"}
    fig = pk.book.check_your_model.plot_fix_savings(frame)  # no source: the frame's own label
    assert not isinstance(fig, pk.display.Note)
    heading = " ".join(" ".join([heading_text(fig)]).split())
    assert str(source) in heading
    with pytest.raises(ValueError, match="contradicts"):
        pk.book.check_your_model.plot_fix_savings(frame, pk.provenance.missing("no GPU"))
