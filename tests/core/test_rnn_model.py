"""perfkit.rnn_model and the advisor's recurrent rows: cuDNN's algorithm, gate kernels, persistent steps."""

from __future__ import annotations

import pandas as pd
import pytest

from perfkit import calibrated
from perfkit.advisor.ops import Op
from perfkit.advisor.price import Pricer
from perfkit.devices import device_spec
from perfkit.rnn_model import RNN_EVIDENCE, cudnn_algo, fit_persistent, gate_bytes, persistent_step_s, rnn_evidence
from testkit import A100, DATA, H100, V100


@pytest.mark.parametrize("args, spec, want", [
    (("lstm", 1024, 1024, 64, 25, 1, 1, "float16"), H100, "persist_static"),
    (("lstm", 1024, 1024, 64, 25, 1, 1, "bfloat16"), H100, "standard"),  # float16 only
    (("lstm", 1024, 1024, 64, 25, 2, 1, "float16"), H100, "standard"),  # one layer only
    (("lstm", 1000, 1000, 64, 25, 1, 1, "float16"), H100, "standard"),  # hidden a multiple of 128
    (("lstm", 1024, 1024, 20, 25, 1, 1, "float16"), H100, "standard"),  # batch a multiple of 8
    (("lstm", 2048, 2048, 64, 25, 1, 1, "float16"), H100, "standard"),  # hidden ≤ 1024
    (("gru", 1024, 1024, 64, 25, 1, 1, "float16"), H100, "standard"),  # never a GRU on sm80+
    (("rnn", 1024, 1024, 96, 25, 1, 1, "float16"), H100, "standard"),  # vanilla: not batch ≥ 96 at hidden ≥ 896
    (("rnn", 512, 512, 96, 25, 1, 1, "float16"), A100, "persist_static"),
    (("lstm", 1024, 1024, 64, 25, 1, 1, "float16"), device_spec("A10"), "standard"),  # 72 SMs
    (("lstm", 1024, 1024, 32, 25, 1, 1, "float16"), V100, "persist_static"),  # Volta: a multiple of 16
    (("lstm", 1024, 1024, 24, 25, 1, 1, "float16"), V100, "standard"),
    (("lstm", 1024, 1024, 32, 25, 1, 1, "float16"), device_spec("T4"), "standard"),  # Turing: never
    (("lstm", 128, 128, 20, 35, 2, 1, "bfloat16"), H100, "persist_static_small_h"),  # hidden ≤ 192
])
def test_cudnn_algo_follows_pytorchs_rules(args, spec, want):
    assert cudnn_algo(*args, spec) == want


def test_backward_small_h_threshold_is_lower():
    assert cudnn_algo("lstm", 160, 160, 20, 35, 2, 1, "bfloat16", H100) == "persist_static_small_h"
    assert cudnn_algo("lstm", 160, 160, 20, 35, 2, 1, "bfloat16", H100, forward=False) == "standard"
    with pytest.raises(ValueError, match="cell"):
        cudnn_algo("transformer", 160, 160, 20, 35, 2, 1, "bfloat16", H100)


def _lstm(**kw) -> Op:
    p = dict(cell="lstm", input_size=1000, hidden=1000, batch=20, seq_len=35, layers=2, directions=1,
             input_grad=True, weight_grad=True)
    return Op(0, "lstm", "LSTM", "rnn", {**p, **kw})


def test_the_standard_algorithm_pays_a_gate_kernel_per_step():
    rows = pd.DataFrame(Pricer("bfloat16", H100, True).rows(_lstm()))
    gates = rows[rows["op"].str.endswith(".gates")]
    assert gates["op"].tolist() == ["rnn.l0.gates"] * 2 + ["rnn.l1.gates"] * 2
    assert gates["pass"].tolist() == ["forward", "dgrad"] * 2 and (gates["count"] == 35).all()
    lat = H100.ceilings.kernel_latency_s or 5e-6
    nbytes = gate_bytes("lstm", 1000, 20, "bfloat16")
    assert nbytes == 2 * 1000 * 20 * (2 * 4 + 3)
    assert gates.iloc[0]["predicted_s"] == pytest.approx(35 * (lat + nbytes / (3350e9 * 0.9)))
    # the recurrent GEMMs stay, per step
    assert (rows["op"] == "rnn.l0.recurrent").sum() == 3  # forward, dgrad, wgrad


def test_a_persistent_kernel_replaces_the_recurrent_gemms():
    op = _lstm(input_size=1024, hidden=1024, batch=64, seq_len=25, layers=1)
    rows = pd.DataFrame(Pricer("float16", H100, False).rows(op))
    assert rows["op"].tolist() == ["rnn.l0.input", "rnn.l0.persistent"]
    step_s, label = persistent_step_s("lstm", 1024, 64, H100)
    ev = RNN_EVIDENCE["hopper"]
    assert step_s == pytest.approx(ev.sync_s + 2 * 4 * 1024 * 1024 * 64 / (ev.persistent_fraction * 989.4e12))
    lat = H100.ceilings.kernel_latency_s or 5e-6
    assert rows.iloc[1]["predicted_s"] == pytest.approx(lat + 25 * step_s)
    assert "H200" in label and rnn_evidence(V100)[1].startswith("assumed from hopper")


def test_the_h200_loops_are_predicted_within_their_fit():
    """rnn_cudnn's cuDNN rows (forward, one layer, float16): the standard ones (no constant fitted: the
    GEMM model plus one kernel per step) within 30 % each, the median within 10 %."""
    spec, frame = calibrated("H200"), pd.read_csv(DATA / "nvidia-h200" / "rnn_cudnn.csv")
    pricer, errors = Pricer("float16", spec, False), []
    for r in frame[frame["impl"] == "cudnn"].itertuples():
        if cudnn_algo(r.cell, r.hidden, r.hidden, r.batch, r.timesteps, 1, 1, "float16", spec) != "standard":
            continue
        op = _lstm(cell=r.cell, input_size=r.hidden, hidden=r.hidden, batch=r.batch, seq_len=r.timesteps, layers=1)
        errors.append(r.time_s / pricer.time_s(op) - 1)
    errors = pd.Series(errors).abs()
    assert len(errors) == 24 and errors.max() < 0.3 and errors.median() < 0.1


def test_hopper_constants_are_what_the_h200_recordings_give():
    fitted = fit_persistent(pd.read_csv(DATA / "nvidia-h200" / "rnn_cudnn.csv"),
                            pd.read_csv(DATA / "nvidia-h200" / "rnn_persistent.csv"), 989.4e12)
    ev = RNN_EVIDENCE["hopper"]
    assert fitted["rows"] == 16
    assert fitted["sync_s"] == pytest.approx(ev.sync_s, rel=0.01)
    assert fitted["persistent_fraction"] == pytest.approx(ev.persistent_fraction, rel=0.01)
