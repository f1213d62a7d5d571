"""Peer predictors (MLSys·im, torch's RuntimeEstimator) on the rows perfkit is scored on.

The scoring helpers are checked on small frames; each peer against its own formula with the numbers it is
given (perfkit's H200 for RuntimeEstimator, mlsysim's catalog H200), and against the recording's rows.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from perfkit.advisor.ops import Op
from perfkit.book.check_your_model import peers
from perfkit.devices import device_spec
from testkit import DATA

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
H200 = device_spec("H200")
LAYERS_CSV = DATA / "nvidia-h200" / "advisor_layers.csv"


def _layers() -> pd.DataFrame:
    return pd.DataFrame({"model": ["a", "a", "a", "b"], "layer": ["x", "attn", "y", "z"], "layers": [2, 12, 3, 1],
                         "op": ["linear", "scaled_dot_product_attention", "relu", "lstm"],
                         "time_s": [1.0, 100.0, 2.0, 5.0]})


# ------------------------------------------------------------------------------ scoring, pure
def test_measured_step_sums_rows_times_layers_leaving_attention_out():
    steps = peers.measured_steps(_layers())
    assert steps.to_dict() == {"a": 1.0 * 2 + 2.0 * 3, "b": 5.0}


def test_compare_steps_puts_measured_over_predicted_beside_each_peer():
    steps = pd.DataFrame({"model": ["a", "b"], "predictor": ["p", "p"], "predicted_step_s": [4.0, math.nan]})
    out = peers.compare_steps(steps, _layers())
    assert out["measured/predicted"].iloc[0] == 2.0 and math.isnan(out["measured/predicted"].iloc[1])


def test_compare_ops_joins_by_position_drops_attention_and_refuses_other_rows():
    ops = pd.DataFrame({"model": ["a", "a", "a"], "predictor": "p", "row": [0, 1, 2], "layer": ["x", "attn", "y"],
                        "op": ["linear", "scaled_dot_product_attention", "relu"], "predicted_s": [0.5, 1.0, 4.0]})
    out = peers.compare_ops(ops, _layers())
    assert out["layer"].tolist() == ["x", "y"] and out["measured/predicted"].tolist() == [2.0, 0.5]
    with pytest.raises(ValueError, match="not the same rows"):
        peers.compare_ops(ops.assign(op=["linear", "scaled_dot_product_attention", "gelu"]), _layers())


def test_error_summary_is_the_median_and_p90_of_the_ratio_minus_one():
    compared = pd.DataFrame({"predictor": "p", "model": ["a", "a", "b"], "measured/predicted": [2.0, 0.5, 1.25]})
    s = peers.op_error_summary(compared).set_index("model")
    assert s.loc["a", "median |error|"] == pytest.approx(0.75) and s.loc["all", "n"] == 3
    assert s.loc["all", "median |error|"] == pytest.approx(0.5)


@pytest.mark.parametrize("call", [lambda: peers.peer_steps("bert"), lambda: peers.peer_ops(3),
                                  lambda: peers.peer_steps([]), lambda: peers.measured_steps("layers"),
                                  lambda: peers.compare_ops(None, _layers()),
                                  lambda: peers.compare_steps(pd.DataFrame({"model": []}), _layers())])
def test_bad_input_names_the_parameter(call):
    with pytest.raises(ValueError, match="models|layers|ops|steps"):
        call()


def test_without_mlsysim_its_step_is_nan_and_says_why(monkeypatch):
    peers._mlsysim_step.cache_clear()
    monkeypatch.setattr(peers, "_mlsysim", lambda: None)
    try:
        predictor, step_s, note = peers._mlsysim_step("gpt2_small")
    finally:
        peers._mlsysim_step.cache_clear()
    assert predictor == "mlsysim 0.3.0" and math.isnan(step_s) and "not installed" in note


# ------------------------------------------------------------------------------ RuntimeEstimator
@pytest.mark.slow
def test_runtime_estimator_prices_a_gemm_at_its_formula_with_the_h200_numbers():
    """4096³ bf16: FLOPs / 2 at 75 % of 989.4 TFLOP/s (above its bytes / 4800 GB/s); backward two such GEMMs;
    the prim.device queries it charges are kept apart."""
    n = 4096
    op = Op(0, "fc", "Linear", "linear", {"tokens": n, "in_features": n, "out_features": n, "input_grad": True,
                                          "weight_grad": True}, name="linear")
    forward, backward, device = peers._rte_op(op, H200)
    gemm = 2 * n**3 / 2 / (0.75 * H200.peaks["bfloat16"])
    assert forward == pytest.approx(gemm, rel=1e-6) and backward == pytest.approx(2 * gemm, rel=1e-6)
    assert device > 0


@pytest.mark.slow
def test_runtime_estimator_prices_an_elementwise_op_by_its_bytes():
    shape = (32, 64, 112, 112)
    forward, backward, _ = peers._rte_op(Op(0, "relu", "ReLU", "relu", {"shape": shape}, name="relu"), H200)
    elements = math.prod(shape)
    assert forward == pytest.approx(2 * 2 * elements / H200.mem_bandwidth, rel=1e-6)  # read x, write y
    assert backward == pytest.approx(3 * 2 * elements / H200.mem_bandwidth, rel=1e-6)  # grad, y → grad in


@pytest.mark.slow
def test_peer_ops_are_the_recorded_rows_of_the_lstm_lm():
    ops = peers.peer_ops("lstm_lm")
    compared = peers.compare_ops(ops, pd.read_csv(LAYERS_CSV))  # raises if a row is not the recording's
    assert compared["op"].tolist() == ["embedding", "dropout", "lstm", "linear"]
    assert (compared["predicted_s"] > 0).all() and "no FLOP formula" in compared.set_index("op").loc["lstm", "note"]


@pytest.mark.slow
def test_runtime_estimator_steps_sum_our_rows_and_run_the_whole_model():
    steps = peers.peer_steps("lstm_lm").set_index("predictor")
    ops = peers.peer_ops("lstm_lm")
    assert steps.loc[peers.RTE, "predicted_step_s"] == pytest.approx((ops["predicted_s"] * ops["layers"]).sum())
    assert steps.loc[peers.RTE_WHOLE, "predicted_step_s"] > 0


# ------------------------------------------------------------------------------ mlsysim
@pytest.mark.slow
def test_mlsysim_prices_gpt2_as_its_roofline_says():
    pytest.importorskip("mlsysim", reason="mlsysim is not installed (pip install mlsysim==0.3.0)")
    predictor, step_s, note = peers._mlsysim_step("gpt2_small")
    # 3 × 248 MFLOP per token × 8 × 1024 tokens at 0.5 × 989 TFLOP/s, + 1e-5 s dispatch + 12 layers × 3 × 1e-5 s
    assert predictor.startswith("mlsysim ") and "GPT2_Small" in note
    assert step_s == pytest.approx(3 * 248e6 * 8 * 1024 / (0.5 * 989e12) + 1e-5 + 12 * 3 * 1e-5, rel=1e-6)
    _, lstm_s, lstm_note = peers._mlsysim_step("lstm_lm")
    assert lstm_s > 0 and "generic Workload" in lstm_note
