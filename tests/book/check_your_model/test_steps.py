"""``model_steps``: whole training steps measured beside the advisor's step, its analysis, and the report's use.

The experiment runs on the CPU (shrunk models, a few steps: rows, not speeds, are checked); its GPU code path
runs on conftest's fake H100 at the real sizes, on the meta device (nothing computed; no number is shown).
"""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd
import pytest

import perfkit as pk
from perfkit import placement
from perfkit.book.check_your_model import steps as st
from perfkit.calibration import calibrated
from perfkit.experiments.registry import REGISTRY
from perfkit.memory_model import memory_time
from perfkit.zoo import parameter_count

from testkit import DATA, H100

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_registered_by_its_module_for_a_gpu():
    exp = REGISTRY["model_steps"]
    assert exp.needs == ("cuda",) and exp.module == "perfkit.book.check_your_model.steps"
    assert list(exp.columns) == list(st.COLUMNS) and "time_s" in exp.columns
    assert "4 of its 32 layers" in exp.description


def test_the_models_are_the_chapters_at_its_sizes():
    assert set(st.STEP_MODELS) == {"gpt2_small", "resnet50", "lstm_lm", "llama_7b", "vit_b_16", "mobilenet_v2"}
    for name, shape in (("gpt2_small", (8, 1024)), ("resnet50", (32, 3, 224, 224)), ("lstm_lm", (20, 35)),
                        ("llama_7b", (1, 2048)), ("vit_b_16", (64, 3, 224, 224)), ("mobilenet_v2", (64, 3, 224, 224))):
        model, x = st.step_inputs(name, "cuda", meta=True)
        assert tuple(x.shape) == shape and x.device.type == "meta"
    llama, _ = st.step_inputs("llama_7b", "cuda", meta=True)
    assert len(llama.layers) == 4 and st.BLOCKS["llama_7b"] == ("layers.", 4, 32)
    vit, images = st.step_inputs("vit_b_16", "cpu", dtype="bfloat16")  # shrunk, in the dtype asked for
    assert str(images.dtype) == "torch.bfloat16" and vit.heads.head.weight.dtype == images.dtype
    _, tokens = st.step_inputs("gpt2_small", "cpu")
    assert str(tokens.dtype) == "torch.int64" and 0 <= int(tokens.min()) and int(tokens.max()) < 1001


def test_a_cpu_run_times_each_step_of_the_cheap_models():
    seen = []
    frame = st.model_steps(device="cpu", dtype="bfloat16", steps=3, progress=False, on_row=seen.append)
    assert list(frame.columns) == list(st.COLUMNS) and len(seen) == len(frame)
    assert list(zip(frame["model"], frame["mode"])) == [(m, mode) for m in st._QUICK for mode in st.MODES]
    assert set(frame["dtype"]) == {"float32"} and (frame["steps"] == 3).all()  # CPUs run float32
    assert (frame["time_s"] > 0).all() and (frame["p10_s"] <= frame["time_s"]).all()
    assert (frame["time_s"] <= frame["p90_s"]).all()
    assert frame["peak_memory_bytes"].isna().all()  # no CPU number stands in for a GPU's
    assert (frame["block_share"] == 1).all() and (frame["ops"] > 0).all()
    train, infer = frame[frame["mode"] == "train"], frame[frame["mode"] == "inference"]
    assert (train["forward_backward_s"] > 0).all() and (train["optimizer_s"] > 0).all()
    assert set(train["optimizer"]) == {"AdamW foreach"} and set(infer["optimizer"]) == {""}
    assert infer[["forward_backward_s", "optimizer_s", "predicted_optimizer_s"]].isna().all().all()
    spec = st.measured_spec("cpu")
    if spec is None:
        assert frame["predicted_s"].isna().all()
    else:
        assert (frame["predicted_s"] > 0).all()
        vit = train[train["model"] == "vit_b_16"].iloc[0]
        assert vit["predicted_optimizer_s"] == pytest.approx(memory_time(7 * vit["params"] * 4, spec))
    model, _ = st.step_inputs("vit_b_16", "cpu")
    assert frame.loc[frame["model"] == "vit_b_16", "params"].iloc[0] == parameter_count(model)
    assert frame["input"].iloc[0] == "4×12 tokens" and frame["input"].iloc[2] == "2×3×32×32 images"
    assert frame.attrs["meta"]["experiment"] == "model_steps" and frame.attrs["meta"]["device_kind"] == "cpu"


def test_the_gpu_path_runs_the_real_sizes_in_bfloat16(fake_gpu):
    frame = st.model_steps(models="llama_7b", steps=1, progress=False)
    assert list(frame["mode"]) == list(st.MODES) and set(frame["dtype"]) == {"bfloat16"}
    train = frame.iloc[0]
    assert train["input"] == "1×2048 tokens" and train["block_share"] == pytest.approx(4 / 32)
    assert train["params"] == 4096 * 32000 * 2 + 4 * (4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096) + 4096
    assert train["predicted_s"] > 0 and train["predicted_optimizer_s"] == pytest.approx(
        memory_time(7 * train["params"] * 2, H100))
    assert math.isnan(train["peak_memory_bytes"])  # the fake GPU's tensors are on the meta device


def test_a_model_too_large_for_free_memory_is_refused_before_it_is_built(monkeypatch):
    def built(*args, **kwargs):
        raise AssertionError("built the model before checking its size")

    monkeypatch.setattr(st, "_run_steps", built)
    with placement.use(device="cuda", spec=H100, free_bytes=1 << 30, tensor_device="meta"):
        with pytest.raises(ValueError, match=r"model_steps \(llama_7b, train\) needs"):
            st.model_steps(models=["llama_7b"], progress=False)


@pytest.mark.parametrize("bad, error, match", [
    ({"models": "bert"}, LookupError, "models 'bert'; known: gpt2_small"), ({"models": []}, LookupError, "models"),
    ({"dtype": "int8"}, ValueError, "dtype"), ({"dtype": 16}, TypeError, "dtype"),
    ({"steps": 0}, ValueError, "steps"), ({"steps": 2.0}, TypeError, "steps"), ({"steps": True}, TypeError, "steps"),
    ({"device": "tpu"}, ValueError, "device")])
def test_bad_input_is_refused_before_any_model_is_built(bad, error, match, monkeypatch):
    def built(*args, **kwargs):
        raise AssertionError("built or measured before refusing")

    monkeypatch.setattr(st, "step_inputs", built)
    monkeypatch.setattr(st, "_measure", built)
    with pytest.raises(error, match=match):
        st.model_steps(**{"device": "cpu", **bad})


def test_adamw_is_priced_by_its_seven_tensors():
    assert st.adamw_time_s(10**9, "bfloat16", H100) == pytest.approx(memory_time(14e9, H100))
    assert st.adamw_time_s(10**9, "float32", H100) == pytest.approx(memory_time(28e9, H100))
    assert math.isnan(st.adamw_time_s(10**9, "bfloat16", None))


# ------------------------------------------------------------------------------ the pure analysis
def _steps() -> pd.DataFrame:
    return pd.DataFrame({"model": ["gpt2_small", "gpt2_small", "llama_7b", "resnet50"],
                         "mode": ["train", "inference", "train", "train"],
                         "forward_backward_s": [0.030, math.nan, 0.020, 0.010],
                         "predicted_s": [0.025, 0.008, 0.016, 0.010], "block_share": [1.0, 1.0, 0.125, 1.0]})


def _layers() -> pd.DataFrame:
    return pd.DataFrame({"model": ["gpt2_small"] * 3 + ["llama_7b"] * 3,
                         "layer": ["wte", "blocks.0.attn", "lm_head", "embed", "layers.0.attention.wq", "output"],
                         "layers": [1, 12, 1, 1, 128, 1], "time_s": [1e-4, 1e-3, 2e-3, 2e-4, 1e-4, 2e-3],
                         "scored": [True, True, False, True, True, True]})


def test_whole_step_ratios_are_forward_backward_over_predicted_in_training():
    r = st.whole_step_ratios(_steps()).set_index("model")
    assert list(r.index) == ["gpt2_small", "llama_7b", "resnet50"]
    assert r.loc["gpt2_small", "ratio"] == pytest.approx(1.2) and r.loc["llama_7b", "ratio"] == pytest.approx(1.25)


def test_step_gaps_against_the_ops_timed_alone():
    g = st.step_gaps(_steps(), _layers()).set_index("model")
    # GPT-2: the unscored lm_head row is left out: 1e-4 + 12 × 1e-3
    assert g.loc["gpt2_small", "ops_s"] == pytest.approx(12.1e-3) and g.loc["gpt2_small", "op_instances"] == 13
    assert g.loc["gpt2_small", "gap_s"] == pytest.approx(0.030 - 12.1e-3)
    assert g.loc["gpt2_small", "gap_per_op_s"] == pytest.approx((0.030 - 12.1e-3) / 13)
    # LLaMA runs 4 of 32 layers: its 128 block linears count 16 times, embedding and head once
    assert g.loc["llama_7b", "ops_s"] == pytest.approx(2e-4 + 16 * 1e-4 + 2e-3)
    assert g.loc["llama_7b", "op_instances"] == 18
    assert math.isnan(g.loc["resnet50", "ops_s"]) and g.loc["resnet50", "ratio"] == pytest.approx(1.0)
    none = st.step_gaps(_steps())
    assert none["ops_s"].isna().all() and len(none) == 3


def test_analysis_refuses_what_is_not_its_frames():
    with pytest.raises(TypeError, match="model_steps DataFrame"):
        st.step_gaps([1, 2])
    with pytest.raises(ValueError, match="lacks the model_steps columns"):
        st.whole_step_ratios(pd.DataFrame({"model": ["x"]}))
    with pytest.raises(ValueError, match="lacks the advisor_layers columns"):
        st.step_gaps(_steps(), pd.DataFrame({"model": ["x"]}))


# ------------------------------------------------------------------------------ the report
def _recording(folder, frame: pd.DataFrame) -> None:
    folder.mkdir(exist_ok=True)
    frame.to_csv(folder / "model_steps.csv", index=False)
    meta = {"experiment": "model_steps", "device_name": "NVIDIA H200", "device_kind": "gpu", "complete": True,
            "recorded_at": "2026-12-01T10:00:00+00:00", "rows": len(frame), "columns": st.COLUMNS}
    (folder / "model_steps.json").write_text(json.dumps(meta))


def _lstm_rows() -> pd.DataFrame:
    row = {c: math.nan for c in st.COLUMNS}
    row.update(model="lstm_lm", mode="train", dtype="bfloat16", input="20×35 tokens", params=36_026_000,
               block_share=1.0, optimizer="AdamW fused", steps=20, time_s=3.1e-3, p10_s=3e-3, p90_s=3.3e-3,
               forward_backward_s=2.9e-3, optimizer_s=0.2e-3, peak_memory_bytes=1e9, predicted_s=1e-3,
               predicted_optimizer_s=1e-4, ops=5)
    return pd.DataFrame([row, {**row, "mode": "inference", "time_s": 1e-3, "forward_backward_s": math.nan}])


def test_the_step_targets_use_the_whole_step_where_it_was_recorded(tmp_path, capsys):
    from perfkit.book.check_your_model.report import print_report, targets, validation_report

    _recording(tmp_path / "nvidia-h200", _lstm_rows())
    for name in ("activation_sizes.csv", "activation_sizes.json"):  # a family, as every GPU folder has
        shutil.copy(DATA / "nvidia-h200" / name, tmp_path / "nvidia-h200")
    (report,) = validation_report(tmp_path)
    w = report.whole_steps.set_index("model")
    assert list(w.index) == ["lstm_lm"]  # train rows only
    model, x = st.step_inputs("lstm_lm", "cuda", meta=True)
    predicted = pk.advise(model, x, "bfloat16", calibrated("H200")).step_s  # today's, not the recorded 1e-3
    assert w.loc["lstm_lm", "predicted_step_s"] == pytest.approx(predicted)
    assert w.loc["lstm_lm", "ratio"] == pytest.approx(2.9e-3 / predicted)
    t = targets(report).set_index("target")["value"]
    assert t["step measured ÷ predicted: lstm_lm"] == pytest.approx(2.9e-3 / predicted)
    assert math.isnan(t["step measured ÷ predicted: resnet50"])
    assert not any("model_steps" in n for n in report.notes)
    print_report([report])
    assert "Whole training steps (model_steps" in capsys.readouterr().out


def test_without_model_steps_the_step_is_the_sum_of_the_ops_and_a_note_says_so(tmp_path):
    from perfkit.book.check_your_model.report import Report, targets, validation_report

    folder = tmp_path / "nvidia-h200"
    folder.mkdir()
    for name in ("activation_sizes.csv", "activation_sizes.json"):
        shutil.copy(DATA / "nvidia-h200" / name, folder)
    (report,) = validation_report(tmp_path)
    assert report.whole_steps is None
    assert "no model_steps recording on nvidia-h200: the step is the sum of the ops timed alone" in report.notes
    # a report with both: a model's whole step wins, its op sum stands in where no whole step was recorded
    sums = pd.DataFrame({"model": ["lstm_lm", "gpt2_small"], "ratio": [1.74, 1.11]})
    whole = pd.DataFrame({"model": ["lstm_lm"], "ratio": [1.05]})
    both = Report("x", report.spec, report.families, steps=sums, whole_steps=whole)
    value = targets(both).set_index("target")["value"]
    assert value["step measured ÷ predicted: lstm_lm"] == pytest.approx(1.05)
    assert value["step measured ÷ predicted: gpt2_small"] == pytest.approx(1.11)
    both.whole_steps = None
    assert targets(both).set_index("target").loc["step measured ÷ predicted: lstm_lm", "value"] == pytest.approx(1.74)


@pytest.mark.gpu
def test_a_gpu_step_is_physically_possible_and_its_parts_add_up():
    """On a GPU (two cheap models, the real sizes, 5 steps): the forward + backward is within the step, the
    step's FLOPs (the advisor's count) run under the datasheet peak, and the peak memory is counted."""
    from perfkit.advisor import advise

    frame = st.model_steps(models=["lstm_lm", "gpt2_small"], steps=5, device="cuda", progress=False)
    spec = pk.current_device()
    train = frame[frame["mode"] == "train"]
    assert (train["forward_backward_s"] <= train["time_s"]).all() and (train["optimizer_s"] > 0).all()
    assert set(train["optimizer"]) == {"AdamW fused"} and (frame["peak_memory_bytes"] > 0).all()
    for row in train.itertuples():
        model, x = st.step_inputs(row.model, "cuda", meta=True)
        flops = advise(model, x, row.dtype, spec).flops
        assert flops / row.forward_backward_s <= spec.peak_flop_s(row.dtype), row.model
