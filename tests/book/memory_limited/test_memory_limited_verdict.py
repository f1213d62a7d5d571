"""Chapter 06's two-sided verdicts: "bytes saved predict time saved" holds only where the measured
saving is within half to twice the byte model's (a saving 6× the prediction is as wrong as one a sixth
of it), and "≈ the copy ceiling" or "at memory speed" fail above as well as below. Made-up frames
whose answers are known by hand (the model's own predictions, rescaled); nothing is timed."""

from __future__ import annotations

import pandas as pd
import pytest

from perfkit.book.memory_limited import fusion, verdict
from perfkit.book.verdict import verdict_table
from testkit import H100, H100_NAME, framed

GPU_META = {"experiment": "fusion_chains", "device_name": H100_NAME, "device": "H100-SXM", "device_kind": "gpu",
            "recorded_at": "2026-01-02T00:00:00+00:00", "complete": True}
RULE = "Bytes saved predict time saved"


@pytest.fixture(scope="module")
def chains() -> pd.DataFrame:
    return fusion.predicted_chains(H100)


def _saving_times(chains: pd.DataFrame, factor: float) -> pd.DataFrame:
    """The chains as if measured: compiled at the model's time, eager slower by ``factor`` × the
    predicted saving, so every measured saving is ``factor`` × the predicted one."""
    keys = ["chain", "batch", "in_features", "out_features", "size", "phase"]
    compiled = chains[chains["mode"] == "compiled"].set_index(keys)["predicted_s"]
    out = chains.copy()
    eager = out["mode"] == "eager"
    saved = out.loc[eager, "predicted_s"].to_numpy() - compiled.loc[
        pd.MultiIndex.from_frame(out.loc[eager, keys])].to_numpy()
    out["time_s"] = out["predicted_s"]
    out.loc[eager, "time_s"] = out.loc[eager, "predicted_s"] + (factor - 1) * saved
    return framed(out, GPU_META)


@pytest.mark.parametrize("factor, now, expected", [
    (1.0, "100", "holds"), (1.8, "180", "holds"), (0.6, "60", "holds"),
    (3.0, "300", "weaker"), (0.3, "30", "weaker"),
    (5.93, "593", "gone"),  # the H200's median: the conv chain saved 11× its bytes' worth
    (0.1, "10", "gone")])
def test_a_saving_far_from_its_bytes_worth_either_way_does_not_hold(chains, factor, now, expected):
    frames = {"fusion_chains": _saving_times(chains, factor)}
    assert verdict.effects(frames)["fusion_realised"] == pytest.approx(factor)
    row = verdict_table(verdict.findings(frames)).set_index("rule").loc[RULE]
    assert (row["now"], row["verdict"]) == (now, expected)


def test_the_two_sided_claims_state_their_bands():
    claims = verdict_table(verdict.findings({})).set_index("rule")["claim"]
    assert claims[RULE] == "fusion saves what its bytes are worth; holds within 50–200 %"
    assert claims["Large tensors stream at copy speed"].endswith("; holds within 80–125 %")
    assert claims["Pooling is memory-bound"].endswith("; holds within 60–167 %")
    assert "holds within" not in claims["Fuse the ops after a GEMM"]  # one-sided: a larger gain only helps
    assert verdict.BYTES_PREDICT_TIME.gone == (0.2, 5.0)
    assert verdict.AT_COPY_SPEED.judge(1.5) == "weaker" and verdict.AT_COPY_SPEED.judge(2.5) == "gone"
    assert verdict.AT_MEMORY_SPEED.judge(0.15) == "gone" and verdict.AT_MEMORY_SPEED.judge(1.0) == "holds"
